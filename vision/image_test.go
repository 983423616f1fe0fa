package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// seedImages returns small encoded images of every kind the decoders meet:
// PNG gray 8/16, RGB, RGBA, paletted with transparency, 16-bit RGBA; JPEG
// gray and colour; GIF.
func seedImages(t testing.TB) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	r := image.Rect(0, 0, 13, 9)
	fill := func(set func(x, y int, v [4]uint8)) {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				set(x, y, [4]uint8{uint8(rng.UintN(256)), uint8(rng.UintN(256)), uint8(rng.UintN(256)), uint8(rng.UintN(256))})
			}
		}
	}
	g := image.NewGray(r)
	fill(func(x, y int, v [4]uint8) { g.SetGray(x, y, color.Gray{v[0]}) })
	g16 := image.NewGray16(r)
	fill(func(x, y int, v [4]uint8) { g16.SetGray16(x, y, color.Gray16{uint16(v[0])<<8 | uint16(v[1])}) })
	rgb := image.NewRGBA(r)
	fill(func(x, y int, v [4]uint8) { rgb.SetRGBA(x, y, color.RGBA{v[0], v[1], v[2], 255}) })
	nrgba := image.NewNRGBA(r)
	fill(func(x, y int, v [4]uint8) { nrgba.SetNRGBA(x, y, color.NRGBA{v[0], v[1], v[2], v[3]}) })
	n64 := image.NewNRGBA64(r)
	fill(func(x, y int, v [4]uint8) {
		n64.SetNRGBA64(x, y, color.NRGBA64{uint16(v[0]) << 8, uint16(v[1]) << 4, uint16(v[2]), 0xffff})
	})
	pal := image.NewPaletted(r, color.Palette{color.NRGBA{1, 2, 3, 0}, color.Gray{200}, color.RGBA{9, 80, 7, 255}})
	fill(func(x, y int, v [4]uint8) { pal.SetColorIndex(x, y, v[0]%3) })

	var out [][]byte
	for _, m := range []image.Image{g, g16, rgb, nrgba, n64, pal} {
		var b bytes.Buffer
		if err := png.Encode(&b, m); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Bytes())
	}
	for _, m := range []image.Image{g, rgb} {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 80}); err != nil {
			t.Fatal(err)
		}
		out = append(out, b.Bytes())
	}
	var b bytes.Buffer
	if err := gif.Encode(&b, pal, nil); err != nil {
		t.Fatal(err)
	}
	return append(out, b.Bytes())
}

// FuzzDecode feeds arbitrary bytes to Decode under a small pixel limit. It
// must not panic; a decoded image must be well formed and within the limit;
// FromImage's fast paths must agree with the generic color-model path on
// opaque pixels; and the test transform must accept the result.
func FuzzDecode(f *testing.F) {
	for _, s := range seedImages(f) {
		f.Add(s)
	}
	// Hand-made files Go's encoders cannot write: interlaced (Adam7),
	// 16-bit RGB, palette with transparency, gray with alpha.
	files, _ := filepath.Glob(filepath.Join("testdata", "*.png"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Decode(bytes.NewReader(data), WithMaxPixels(limit))
		if err != nil {
			return
		}
		if p.C != 1 && p.C != 3 || p.W <= 0 || p.H <= 0 || p.W*p.H > limit || len(p.Pix) != p.W*p.H*p.C {
			t.Fatalf("malformed result %d×%d×%d, %d samples", p.W, p.H, p.C, len(p.Pix))
		}
		img, _, err := image.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("Decode succeeded, image.Decode failed: %v", err)
		}
		var ref Pixels
		fromImageGeneric(&ref, img)
		if ref.W != p.W || ref.H != p.H || ref.C != p.C && ref.C != 3 {
			t.Fatalf("generic path %d×%d×%d, fast %d×%d×%d", ref.W, ref.H, ref.C, p.W, p.H, p.C)
		}
		b := img.Bounds()
		for y := range p.H {
			for x := range p.W {
				if _, _, _, a := img.At(b.Min.X+x, b.Min.Y+y).RGBA(); a != 0xffff {
					continue
				}
				for c := range 3 {
					got := p.Pix[(y*p.W+x)*p.C+min(c, p.C-1)]
					want := ref.Pix[(y*ref.W+x)*ref.C+min(c, ref.C-1)]
					if got != want {
						t.Fatalf("%T pixel (%d,%d) channel %d: fast %d, generic %d", img, x, y, c, got, want)
					}
				}
			}
		}
		if _, err := TestTransform(16).Apply(nil, p, nil); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDecodeSeeds(t *testing.T) {
	wantC := []int{1, 1, 3, 3, 3, 3, 1, 3, 3}
	for i, s := range seedImages(t) {
		p, err := Decode(bytes.NewReader(s))
		if err != nil {
			t.Fatalf("seed %d: %v", i, err)
		}
		if p.W != 13 || p.H != 9 || p.C != wantC[i] {
			t.Errorf("seed %d: %d×%d×%d, want 13×9×%d", i, p.W, p.H, p.C, wantC[i])
		}
	}
}

// The hand-made seeds decode; interlacing does not change the pixels.
func TestDecodeTestdata(t *testing.T) {
	want := map[string]int{"gray8.png": 1, "gray8_interlaced.png": 1, "rgb16_interlaced.png": 3,
		"palette_trns_interlaced.png": 3, "gray_alpha.png": 3}
	got := map[string]*Pixels{}
	for name, c := range want {
		p, err := DecodeFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if p.W != 11 || p.H != 7 || p.C != c {
			t.Errorf("%s: %d×%d×%d, want 11×7×%d", name, p.W, p.H, p.C, c)
		}
		got[name] = p
	}
	if !bytes.Equal(got["gray8.png"].Pix, got["gray8_interlaced.png"].Pix) {
		t.Error("interlaced and plain gray PNGs differ")
	}
}

// A PNG whose header claims 100000×100000 pixels is refused before decoding.
func TestDecodeRefusesBombs(t *testing.T) {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	// IHDR: 8-byte signature, length, "IHDR", width, height, …, CRC at 29.
	resize := func(w, h uint32) []byte {
		d := bytes.Clone(data)
		binary.BigEndian.PutUint32(d[16:], w)
		binary.BigEndian.PutUint32(d[20:], h)
		binary.BigEndian.PutUint32(d[29:], crc32.ChecksumIEEE(d[12:29]))
		return d
	}
	_, err := Decode(bytes.NewReader(resize(100000, 100000)))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	// 3000×3000 passes a limit of 16 Mi pixels, and the data, far too
	// short for it, fails to decode.
	if _, err := Decode(bytes.NewReader(resize(3000, 3000)), WithMaxPixels(1<<24)); err == nil || errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want a decoding error", err)
	}
	if _, err := Decode(bytes.NewReader(resize(3000, 3000)), WithMaxPixels(1<<20)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if _, err := Decode(bytes.NewReader(data), WithMaxPixels(0)); err == nil {
		t.Fatal("WithMaxPixels(0) accepted")
	}
	if _, err := Decode(bytes.NewReader([]byte("not an image"))); err == nil {
		t.Fatal("garbage decoded")
	}
}

func BenchmarkTransform(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := randomPixels(rng, 512, 624, 1) // a typical IU X-Ray film
	for _, tr := range []Transform{TestTransform(224), TrainTransform(256, 224)} {
		b.Run(tr.String(), func(b *testing.B) {
			var dst *Image
			b.SetBytes(int64(len(src.Pix)))
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = tr.Apply(dst, src, rng); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
