package memtrans

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

// viewAttention returns the attention of token t over the patches of view
// v, a Grid×Grid raster (row-major), from a report generated with
// WithAttention.
func (r Report) viewAttention(t, v int) ([]float32, error) {
	if t < 0 || t >= len(r.Attention) {
		return nil, fmt.Errorf("memtrans: token %d of %d has no attention (generate WithAttention)", t, len(r.Attention))
	}
	p := r.Grid * r.Grid
	row := r.Attention[t]
	if p == 0 || (v+1)*p > len(row) || v < 0 {
		return nil, fmt.Errorf("memtrans: view %d outside the %d patch weights of a %d×%d grid", v, len(row), r.Grid, r.Grid)
	}
	return row[v*p : (v+1)*p], nil
}

// renderAttention overlays patch weights (grid×grid, row-major) on a view
// as a heatmap, as in R2Gen's Figure 6: weights are normalised to [0, 1],
// upsampled bilinearly to the image size and blended (alpha 0.5) in a
// blue-to-red colour map over the gray image.
func renderAttention(view image.Image, weights []float32, grid int) (*image.RGBA, error) {
	if grid <= 0 || len(weights) != grid*grid {
		return nil, fmt.Errorf("memtrans: %d weights for a %d×%d grid", len(weights), grid, grid)
	}
	b := view.Bounds()
	if b.Dx() <= 0 || b.Dy() <= 0 {
		return nil, fmt.Errorf("memtrans: empty image")
	}
	lo, hi := float32(math.Inf(1)), float32(math.Inf(-1))
	for _, w := range weights {
		lo, hi = min(lo, w), max(hi, w)
	}
	span := hi - lo
	if span <= 0 {
		span = 1
	}
	at := func(x, y int) float64 {
		x, y = max(0, min(grid-1, x)), max(0, min(grid-1, y))
		return float64((weights[y*grid+x] - lo) / span)
	}
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for py := 0; py < b.Dy(); py++ {
		gy := (float64(py)+0.5)*float64(grid)/float64(b.Dy()) - 0.5
		y0 := int(math.Floor(gy))
		fy := gy - float64(y0)
		for px := 0; px < b.Dx(); px++ {
			gx := (float64(px)+0.5)*float64(grid)/float64(b.Dx()) - 0.5
			x0 := int(math.Floor(gx))
			fx := gx - float64(x0)
			v := (1-fy)*((1-fx)*at(x0, y0)+fx*at(x0+1, y0)) + fy*((1-fx)*at(x0, y0+1)+fx*at(x0+1, y0+1))
			gray := color.GrayModel.Convert(view.At(b.Min.X+px, b.Min.Y+py)).(color.Gray).Y
			hr, hg, hb := heat(v)
			blend := func(h uint8) uint8 { return uint8((uint16(gray) + uint16(h)) / 2) }
			out.SetRGBA(px, py, color.RGBA{blend(hr), blend(hg), blend(hb), 255})
		}
	}
	return out, nil
}

// heat maps v in [0, 1] to a blue–cyan–yellow–red colour ("jet").
func heat(v float64) (r, g, b uint8) {
	c := func(x float64) uint8 { return uint8(255 * math.Max(0, math.Min(1, x))) }
	return c(1.5 - math.Abs(4*v-3)), c(1.5 - math.Abs(4*v-2)), c(1.5 - math.Abs(4*v-1))
}

// WriteAttentionPNG renders the attention of token t over view v of a study
// and writes it as PNG.
func WriteAttentionPNG(w io.Writer, view image.Image, r Report, t, v int) error {
	weights, err := r.viewAttention(t, v)
	if err != nil {
		return err
	}
	img, err := renderAttention(view, weights, r.Grid)
	if err != nil {
		return err
	}
	return png.Encode(w, img)
}
