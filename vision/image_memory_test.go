package vision

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"testing"
)

func heapAllocated(f func()) uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	before := s[0].Value.Uint64()
	f()
	metrics.Read(s)
	return s[0].Value.Uint64() - before
}

// The in-place conversion of Decode gives exactly FromImage's samples, for
// every type it converts in place, sub-images and translucent pixels
// included.
func TestFromImageOwnedMatchesFromImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	r := image.Rect(0, 0, 23, 17)
	fill := func(b []byte) {
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
	}
	var imgs []image.Image
	g := image.NewGray(r)
	fill(g.Pix)
	g16 := image.NewGray16(r)
	fill(g16.Pix)
	n := image.NewNRGBA(r)
	fill(n.Pix)
	n64 := image.NewNRGBA64(r)
	fill(n64.Pix)
	rgba := image.NewRGBA(r)
	for i := 0; i < len(rgba.Pix); i += 4 {
		a := byte(rng.IntN(256))
		if i%8 == 0 {
			a = 0xff
		}
		c := color.RGBAModel.Convert(color.NRGBA{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), a}).(color.RGBA)
		rgba.Pix[i], rgba.Pix[i+1], rgba.Pix[i+2], rgba.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	sub := image.Rect(3, 2, 19, 15)
	imgs = append(imgs, g, g16, n, n64, rgba, g.SubImage(sub), g16.SubImage(sub), n.SubImage(sub), n64.SubImage(sub), rgba.SubImage(sub))
	for _, img := range imgs {
		want := FromImage(nil, img)
		got := fromImageOwned(cloneImage(img))
		if got.W != want.W || got.H != want.H || got.C != want.C || !slices.Equal(got.Pix, want.Pix) {
			t.Errorf("%T %v: in place %d×%d×%d differs from FromImage %d×%d×%d", img, img.Bounds(), got.W, got.H, got.C, want.W, want.H, want.C)
		}
	}
}

// cloneImage deep-copies the image types fromImageOwned converts.
func cloneImage(img image.Image) image.Image {
	switch m := img.(type) {
	case *image.Gray:
		c := *m
		c.Pix = slices.Clone(m.Pix)
		return &c
	case *image.Gray16:
		c := *m
		c.Pix = slices.Clone(m.Pix)
		return &c
	case *image.NRGBA:
		c := *m
		c.Pix = slices.Clone(m.Pix)
		return &c
	case *image.NRGBA64:
		c := *m
		c.Pix = slices.Clone(m.Pix)
		return &c
	case *image.RGBA:
		c := *m
		c.Pix = slices.Clone(m.Pix)
		return &c
	}
	panic("unexpected type")
}

// pngHeader returns a PNG signature and IHDR chunk declaring w×h of the
// given bit depth and colour type: all Decode reads before refusing.
func pngHeader(w, h uint32, depth, colorType byte) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = depth, colorType
	binary.Write(&b, binary.BigEndian, uint32(13))
	chunk := append([]byte("IHDR"), ihdr[:]...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// Decoding a view costs about its size in its own bit depth: an 8-bit RGB
// PNG about 4 bytes a pixel (Go keeps it as RGBA; before the in-place
// conversion it was 7), 16-bit gray 2 bytes. An 8192² PNG is refused from
// its header at the default limit.
func TestDecodeMemory(t *testing.T) {
	const side = 1024
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name     string
		img      image.Image
		perPixel float64 // bytes a pixel the decode may allocate
	}{
		{"gray8", image.NewGray(image.Rect(0, 0, side, side)), 1.25},
		{"gray16", image.NewGray16(image.Rect(0, 0, side, side)), 2.25},
		{"rgb8", image.NewRGBA(image.Rect(0, 0, side, side)), 4.25},
	} {
		switch m := c.img.(type) {
		case *image.Gray:
			for i := range m.Pix {
				m.Pix[i] = byte(rng.IntN(16))
			}
		case *image.Gray16:
			for i := range m.Pix {
				m.Pix[i] = byte(rng.IntN(16))
			}
		case *image.RGBA:
			for i := range m.Pix {
				m.Pix[i] = byte(rng.IntN(16))
				if i%4 == 3 {
					m.Pix[i] = 0xff
				}
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, c.img); err != nil {
			t.Fatal(err)
		}
		var p *Pixels
		var err error
		n := heapAllocated(func() { p, err = Decode(bytes.NewReader(b.Bytes())) })
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %d²: %d bytes allocated, %.2f a pixel", c.name, side, n, float64(n)/side/side)
		if float64(n) > c.perPixel*side*side+256<<10 {
			t.Errorf("%s: %d bytes allocated for %d pixels", c.name, n, side*side)
		}
		old := heapAllocated(func() {
			img, _, _ := image.Decode(bytes.NewReader(b.Bytes()))
			FromImage(nil, img)
		})
		t.Logf("%s %d²: decoding then copying (FromImage) allocates %.2f a pixel", c.name, side, float64(old)/side/side)
		if p.W != side || p.H != side {
			t.Errorf("%s: %d×%d", c.name, p.W, p.H)
		}
	}
	var err error
	n := heapAllocated(func() { _, err = Decode(bytes.NewReader(pngHeader(8192, 8192, 8, 2))) })
	if !errors.Is(err, ErrTooLarge) || n > 256<<10 {
		t.Errorf("8192² RGB header: %v after %d bytes", err, n)
	}
	if _, err := Decode(bytes.NewReader(pngHeader(4096, 4096, 16, 0))); errors.Is(err, ErrTooLarge) {
		t.Errorf("4096² 16-bit gray refused at the default limit: %v", err)
	}
}

// DecodeFile refuses FIFOs and devices at once, and files over the size
// limit.
func TestDecodeFileNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "view.png")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFOs:", err)
	}
	for _, p := range []string{fifo, "/dev/zero"} {
		if _, err := DecodeFile(p); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", p, err)
		}
	}
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 64, 64)))
	path := filepath.Join(dir, "small.png")
	os.WriteFile(path, b.Bytes(), 0o644)
	if _, err := DecodeFile(path, WithMaxFileBytes(int64(b.Len()-1))); !errors.Is(err, ErrFileTooLarge) {
		t.Errorf("file over the limit: %v", err)
	}
	if _, err := DecodeFile(path); err != nil {
		t.Error(err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if _, err := DecodeFile("/dev/zero", WithNonRegularFiles(), WithMaxFileBytes(1<<20)); err == nil {
			t.Error("/dev/zero decoded")
		}
	}
}
