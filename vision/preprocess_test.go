package vision

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/safetensors"
	"github.com/radgen/radgen/internal/testutil"
)

// readGolden returns every tensor of a safetensors file as float32, with
// shapes and metadata.
func readGolden(t testing.TB, path string) (map[string][]float32, map[string][]int, map[string]string) {
	t.Helper()
	f, err := safetensors.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tensors, shapes := map[string][]float32{}, map[string][]int{}
	for _, name := range f.Names() {
		v, shape, err := f.Float32(name)
		if err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		tensors[name], shapes[name] = v, shape
	}
	return tensors, shapes, f.Metadata()
}

// diffStats returns max and mean absolute difference.
func diffStats(t *testing.T, got, want []float32) (maxd, meand float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("length %d, want %d", len(got), len(want))
	}
	var sum float64
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		sum += d
		maxd = max(maxd, d)
	}
	return maxd, sum / float64(len(got))
}

// TestTransformParity checks decoding, the test transform and Resize(256)
// against torchvision 0.14 + Pillow (../shared/golden/transforms). The
// preprocessing is CPU code on pixels, not tensors: the same whatever
// device RADGEN_DEVICE names.
func TestTransformParity(t *testing.T) {
	t.Log("device: none (preprocessing is CPU code on pixels, not tensors; RADGEN_DEVICE does not apply)")
	dir := testutil.Dir(t, "RADGEN_GOLDEN_TRANSFORMS", "golden/transforms")
	tensors, shapes, meta := readGolden(t, filepath.Join(dir, "transforms.safetensors"))
	files := strings.Split(meta["files"], ",")
	if len(files) == 0 || files[0] == "" {
		t.Fatal("metadata names no files")
	}
	const maxTol, meanTol = 0.018, 0.002
	for i, name := range files {
		t.Run(name, func(t *testing.T) {
			px, err := DecodeFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			// The decoded pixels against PIL's convert("RGB"), HWC.
			in := tensors[fmt.Sprintf("img%d_input_rgb", i)]
			if s := shapes[fmt.Sprintf("img%d_input_rgb", i)]; len(s) != 3 || s[0] != px.H || s[1] != px.W {
				t.Fatalf("decoded %d×%d, golden shape %v", px.W, px.H, s)
			}
			mismatch := 0
			for j, v := range in {
				p := j / 3
				if float32(px.Pix[p*px.C+min(j%3, px.C-1)]) != v {
					mismatch++
				}
			}
			if mismatch != 0 {
				t.Errorf("decoded pixels: %d of %d samples differ from PIL", mismatch, len(in))
			}

			got, err := TestTransform(224).Apply(nil, px, nil)
			if err != nil {
				t.Fatal(err)
			}
			maxd, meand := diffStats(t, got.Pix, tensors[fmt.Sprintf("img%d_test", i)])
			t.Logf("test transform Resize((224,224)): max|Δ| %.3g, mean|Δ| %.3g", maxd, meand)
			// The acceptance tolerance is max 0.018, mean 0.002; the
			// resampler is Pillow's to the bit, so anything but 0 is a bug.
			if maxd != 0 {
				t.Errorf("test transform: max|Δ| %.4g (acceptance tol %g), mean|Δ| %.4g (tol %g); expected bit-identical output",
					maxd, maxTol, meand, meanTol)
			}

			// Resize(256) + ToTensor: no normalisation (mean 0, std 1).
			r256 := Transform{Shorter: 256, Std: [3]float32{1, 1, 1}}
			got, err = r256.Apply(nil, px, nil)
			if err != nil {
				t.Fatal(err)
			}
			ws := shapes[fmt.Sprintf("img%d_resize256", i)]
			if len(ws) != 3 || ws[1] != got.H || ws[2] != got.W {
				t.Fatalf("Resize(256) gave %d×%d, golden shape %v", got.W, got.H, ws)
			}
			maxd, meand = diffStats(t, got.Pix, tensors[fmt.Sprintf("img%d_resize256", i)])
			t.Logf("Resize(256): max|Δ| %.3g, mean|Δ| %.3g (normalised units: ×%.3g)", maxd, meand, 1/ImageNetStd[2])
			if maxd != 0 {
				t.Errorf("Resize(256): max|Δ| %.4g, mean|Δ| %.4g (0…1 units; acceptance tol %g, %g normalised); expected bit-identical output",
					maxd, meand, maxTol, meanTol)
			}
		})
	}
}

// naiveResize is Pillow's algorithm written plainly: float coefficients per
// output sample, one image-sized pass per axis, rows beyond the vertical
// window included. The fast resize must equal it exactly.
func naiveResize(src *Pixels, w, h int) *Pixels {
	pass := func(in []uint8, inW, inH, outW int, horizontal bool) ([]uint8, int, int) {
		inSize := inW
		if !horizontal {
			inSize = inH
		}
		c := precomputeCoeffs(inSize, outW)
		var out []uint8
		var ow, oh int
		if horizontal {
			ow, oh = outW, inH
		} else {
			ow, oh = inW, outW
		}
		out = make([]uint8, ow*oh*src.C)
		for y := range oh {
			for x := range ow {
				for ch := range src.C {
					s := int32(1 << (precisionBits - 1))
					o := x
					if !horizontal {
						o = y
					}
					for j := range c.bounds[2*o+1] {
						sx, sy := x, y
						if horizontal {
							sx = c.bounds[2*o] + j
						} else {
							sy = c.bounds[2*o] + j
						}
						s += int32(in[(sy*inW+sx)*src.C+ch]) * c.k[o*c.ksize+j]
					}
					out[(y*ow+x)*src.C+ch] = clip8(s)
				}
			}
		}
		return out, ow, oh
	}
	pix, cw, ch := src.Pix, src.W, src.H
	if w != cw {
		pix, cw, ch = pass(pix, cw, ch, w, true)
	}
	if h != ch {
		pix, cw, ch = pass(pix, cw, ch, h, false)
	}
	return &Pixels{W: cw, H: ch, C: src.C, Pix: append([]uint8(nil), pix...)}
}

func randomPixels(rng *rand.Rand, w, h, c int) *Pixels {
	p := &Pixels{W: w, H: h, C: c, Pix: make([]uint8, w*h*c)}
	for i := range p.Pix {
		p.Pix[i] = uint8(rng.UintN(256))
	}
	return p
}

func TestResizeMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	sizes := [][4]int{{1, 1, 1, 1}, {1, 1, 5, 3}, {7, 3, 2, 9}, {300, 250, 224, 224}, {140, 180, 256, 329},
		{37, 41, 37, 12}, {37, 41, 9, 41}, {64, 64, 33, 17}, {5, 400, 3, 21}}
	for _, s := range sizes {
		for _, c := range []int{1, 3} {
			src := randomPixels(rng, s[0], s[1], c)
			got := Resize(nil, src, s[2], s[3])
			want := naiveResize(src, s[2], s[3])
			if got.W != want.W || got.H != want.H || got.C != c {
				t.Fatalf("%v c=%d: got %d×%d×%d", s, c, got.W, got.H, got.C)
			}
			for i := range want.Pix {
				if got.Pix[i] != want.Pix[i] {
					t.Fatalf("%v c=%d: sample %d = %d, naive %d", s, c, i, got.Pix[i], want.Pix[i])
				}
			}
		}
	}
}

// A gray image must transform exactly like its RGB copy.
func TestGrayEqualsRGB(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	gray := randomPixels(rng, 97, 131, 1)
	rgb := &Pixels{W: gray.W, H: gray.H, C: 3, Pix: make([]uint8, 3*len(gray.Pix))}
	for i, v := range gray.Pix {
		rgb.Pix[3*i], rgb.Pix[3*i+1], rgb.Pix[3*i+2] = v, v, v
	}
	for _, tr := range []Transform{TestTransform(64), TrainTransform(80, 64)} {
		a, err := tr.Apply(nil, gray, rand.New(rand.NewPCG(3, 3)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := tr.Apply(nil, rgb, rand.New(rand.NewPCG(3, 3)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range a.Pix {
			if a.Pix[i] != b.Pix[i] {
				t.Fatalf("%v: sample %d: gray %v, rgb %v", tr, i, a.Pix[i], b.Pix[i])
			}
		}
	}
}

func TestShorterSide(t *testing.T) {
	for _, c := range [][5]int{{256, 311, 256, 256, 311}, {300, 250, 256, 307, 256}, {140, 180, 256, 256, 329}, {100, 100, 256, 256, 256}} {
		w, h := shorterSide(c[0], c[1], c[2])
		if w != c[3] || h != c[4] {
			t.Errorf("shorterSide(%d,%d,%d) = %d,%d, want %d,%d", c[0], c[1], c[2], w, h, c[3], c[4])
		}
	}
}

// The training transform is a crop of the resized image, maybe mirrored:
// find the window among all offsets and both orientations.
func TestTrainTransformIsCropOfResize(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	src := randomPixels(rng, 60, 45, 3)
	full, err := Transform{Shorter: 40, Mean: ImageNetMean, Std: ImageNetStd}.Apply(nil, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := TrainTransform(40, 32)
	flips := 0
	seen := map[[2]int]bool{}
	for trial := range 64 {
		r := rand.New(rand.NewPCG(5, uint64(trial)))
		got, err := tr.Apply(nil, src, r)
		if err != nil {
			t.Fatal(err)
		}
		if got.C != 3 || got.H != 32 || got.W != 32 {
			t.Fatalf("shape %d×%d×%d", got.C, got.H, got.W)
		}
		// Same draws as Apply: top, left, flip.
		r = rand.New(rand.NewPCG(5, uint64(trial)))
		top, left := r.IntN(full.H-32+1), r.IntN(full.W-32+1)
		flip := r.Float64() < 0.5
		seen[[2]int{top, left}] = true
		if flip {
			flips++
		}
		for c := range 3 {
			for y := range 32 {
				for x := range 32 {
					sx := left + x
					if flip {
						sx = left + 31 - x
					}
					if g, w := got.Pix[(c*32+y)*32+x], full.Pix[(c*full.H+top+y)*full.W+sx]; g != w {
						t.Fatalf("trial %d (%d,%d,%d): %v, want %v", trial, c, y, x, g, w)
					}
				}
			}
		}
	}
	if flips == 0 || flips == 64 || len(seen) < 10 {
		t.Errorf("randomness looks wrong: %d flips, %d distinct offsets in 64 draws", flips, len(seen))
	}
}

func TestTransformErrors(t *testing.T) {
	src := &Pixels{W: 10, H: 10, C: 1, Pix: make([]uint8, 100)}
	bad := []Transform{
		{},
		{Width: 5, Height: 5, Shorter: 5, Std: ImageNetStd},
		{Width: 5, Std: ImageNetStd},
		{Shorter: 5, Crop: 6, Std: ImageNetStd},
		{Shorter: 5, Flip: 2, Std: ImageNetStd},
		{Shorter: 5},                         // zero std
		TrainTransform(8, 4),                 // random, nil rng
		{Shorter: 1 << 40, Std: ImageNetStd}, // beyond the pixel limit
	}
	for i, tr := range bad {
		if _, err := tr.Apply(nil, src, nil); err == nil {
			t.Errorf("%d: %+v: no error", i, tr)
		}
	}
	if _, err := TestTransform(4).Apply(nil, &Pixels{W: 3, H: 3, C: 2, Pix: make([]uint8, 18)}, nil); err == nil {
		t.Error("two-channel source: no error")
	}
	if _, err := TestTransform(4).Apply(nil, &Pixels{}, nil); err == nil {
		t.Error("empty source: no error")
	}
}

func TestFromImageConversions(t *testing.T) {
	r := image.Rect(2, 3, 6, 8) // non-zero origin
	g16 := image.NewGray16(r)
	g16.SetGray16(2, 3, color.Gray16{Y: 0xabcd})
	p := FromImage(nil, g16)
	if p.C != 1 || p.W != 4 || p.H != 5 || p.Pix[0] != 0xab {
		t.Errorf("Gray16: %d×%d×%d first %#x", p.W, p.H, p.C, p.Pix[0])
	}
	rgba := image.NewNRGBA(r)
	rgba.SetNRGBA(5, 7, color.NRGBA{10, 20, 30, 0}) // alpha dropped, colour kept
	p = FromImage(p, rgba)
	if p.C != 3 || p.Pix[len(p.Pix)-3] != 10 || p.Pix[len(p.Pix)-1] != 30 {
		t.Errorf("NRGBA: %v", p.Pix[len(p.Pix)-3:])
	}
	pal := image.NewPaletted(r, color.Palette{color.Gray{7}, color.RGBA{1, 2, 3, 255}})
	pal.SetColorIndex(3, 3, 1)
	p = FromImage(p, pal)
	if p.C != 3 || p.Pix[0] != 7 || p.Pix[3] != 1 || p.Pix[5] != 3 {
		t.Errorf("Paletted: %v", p.Pix[:6])
	}
}
