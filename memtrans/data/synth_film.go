package data

// Procedural chest films. Every structure is a shape in normalised
// coordinates (u right, v down, both 0…1 across the film) with edges
// softened over about a pixel, so a film can be rendered at any size and
// the findings stay visible down to 64×64. Values are densities in 0…1
// (bright = dense, as on a radiograph): air outside the body ≈ 0.04,
// aerated lung ≈ 0.17, soft tissue ≈ 0.45, heart and fluid ≈ 0.65, metal ≈ 1.

import (
	"image"
	"math"
	"math/rand/v2"
)

// View is the projection of a film.
type View uint8

// Views of a study: IU X-Ray studies have both, MIMIC-CXR ones the frontal.
const (
	Frontal View = iota // posteroanterior: the patient's right on the image's left
	Lateral             // left lateral: anterior on the image's left
)

// String returns the view's name ("frontal" or "lateral").
func (v View) String() string {
	if v == Lateral {
		return "lateral"
	}
	return "frontal"
}

// anatomy is the per-study variation shared by the views: position, size
// and exposure of the patient, so a model must learn the findings rather
// than memorise pixels.
type anatomy struct {
	dx, dy, scale  float64 // patient shift and size
	lungW, lungTop float64 // lung half-width and apex height
	dome           float64 // diaphragm height
	exposure       float64 // global brightness offset
	contrast       float64
	noise          float64    // standard deviation of the quantum noise
	marks          [4]float64 // phases of the lung markings
	opU, opV       float64    // focal opacity centre jitter
	depth          float64    // effusion depth
	collapse       float64    // pneumothorax: lung scale toward the hilum
}

func newAnatomy(rng *rand.Rand) anatomy {
	u := func(lo, hi float64) float64 { return lo + (hi-lo)*rng.Float64() }
	a := anatomy{
		dx: u(-0.025, 0.025), dy: u(-0.02, 0.02), scale: u(0.95, 1.04),
		lungW: u(0.155, 0.175), lungTop: u(0.14, 0.18), dome: u(0.76, 0.80),
		exposure: u(-0.05, 0.05), contrast: u(0.9, 1.1), noise: u(0.015, 0.03),
		opU: u(-0.035, 0.035), opV: u(-0.04, 0.04),
		depth: u(0.15, 0.21), collapse: u(0.38, 0.5),
	}
	for i := range a.marks {
		a.marks[i] = u(0, 2*math.Pi)
	}
	return a
}

// smooth is 1 inside (d < 0) and 0 outside (d > 0) a shape whose signed
// distance is d, with a linear ramp of width w (about a pixel).
func smooth(d, w float64) float64 {
	switch {
	case d <= -w/2:
		return 1
	case d >= w/2:
		return 0
	}
	return 0.5 - d/w
}

// ellipseDist approximates the signed distance to an axis-aligned ellipse.
func ellipseDist(u, v, cu, cv, ru, rv float64) float64 {
	x, y := (u-cu)/ru, (v-cv)/rv
	return (math.Sqrt(x*x+y*y) - 1) * min(ru, rv)
}

// segmentDist is the distance from (u, v) to the segment a–b.
func segmentDist(u, v, au, av, bu, bv float64) float64 {
	du, dv := bu-au, bv-av
	t := ((u-au)*du + (v-av)*dv) / (du*du + dv*dv)
	t = min(max(t, 0), 1)
	pu, pv := au+t*du-u, av+t*dv-v
	return math.Sqrt(pu*pu + pv*pv)
}

// polylineDist is the distance to a polyline through pts (u0, v0, u1, v1, …).
func polylineDist(u, v float64, pts ...float64) float64 {
	d := math.Inf(1)
	for i := 0; i+3 < len(pts); i += 2 {
		d = min(d, segmentDist(u, v, pts[i], pts[i+1], pts[i+2], pts[i+3]))
	}
	return d
}

// blend moves value toward target by weight a in 0…1.
func blend(value, target, a float64) float64 { return value + (target-value)*a }

// film renders one view of a study.
type film struct {
	f  Findings
	a  anatomy
	px float64 // pixel size in normalised units
}

// lungCentre returns the centre of the lung on the image's left (side −1,
// the patient's right) or right (side +1).
func (m *film) lungCentre(side float64) (float64, float64) {
	return 0.5 + side*0.195, m.a.lungTop + 0.31
}

// diaphragm is the height of the diaphragm dome under image column u.
func (m *film) diaphragm(u, side float64) float64 {
	cu, _ := m.lungCentre(side)
	x := (u - cu) / 0.18
	d := m.a.dome
	if side < 0 {
		d -= 0.02 // the right hemidiaphragm sits higher
	}
	return d - 0.07*(1-x*x)
}

// lungMask is the aerated extent of one lung (before any finding), 0…1.
func (m *film) lungMask(u, v, side float64) float64 {
	cu, cv := m.lungCentre(side)
	in := smooth(ellipseDist(u, v, cu, cv, m.a.lungW, 0.35), m.px)
	return in * smooth(v-m.diaphragm(u, side), m.px)
}

func (m *film) frontal(u, v float64) float64 {
	f, a, px := m.f, m.a, m.px
	val := 0.04
	// Soft tissue: trunk, neck, shoulders.
	val = blend(val, 0.45, smooth(ellipseDist(u, v, 0.5, 0.6, 0.47, 0.56), 3*px))
	val = blend(val, 0.45, smooth(max(math.Abs(u-0.5)-0.09, v-0.2), 2*px))
	// Lungs, with markings; pneumothorax and effusion change them.
	for _, side := range [2]float64{-1, 1} {
		s := sideOf(side)
		lung := m.lungMask(u, v, side)
		if lung == 0 {
			continue
		}
		cu, cv := m.lungCentre(side)
		tissue := 0.17 + 0.025*math.Sin(31*u+a.marks[0])*math.Sin(23*v+a.marks[1]) + 0.02*math.Sin(17*(u+v)+a.marks[2])
		tissue += 0.05 * math.Exp(-sq((u-(0.5+side*0.08))/0.06)-sq((v-0.48)/0.08)) // hilum
		if f.Pneumothorax.has(s) {
			// The lung shrinks toward its hilum; the space left is air
			// without markings, bounded by the bright visceral pleural line,
			// and the collapsed lung, which holds little air, is nearly as
			// dense as soft tissue. (Drawn at the density of the aerated
			// lung, it left pneumothorax the faintest finding by far: a
			// linear probe found 13 of 22, and the quickstart's model wrote
			// none of 8.)
			hu, hv := 0.5+side*0.1, cv+0.05
			c := a.collapse
			cu2, cv2 := hu+(cu-hu)*c, hv+(cv-hv)*c
			d := ellipseDist(u, v, cu2, cv2, a.lungW*c, 0.35*c)
			inner := smooth(d, px)
			tissue = blend(0.02, tissue+0.4, inner)
			tissue += 0.22 * smooth(math.Abs(d)-max(0.006, 0.6*px), px)
		}
		if f.Effusion.has(s) {
			// Dependent fluid with a meniscus rising laterally.
			lat := min(math.Abs(u-cu)/a.lungW, 1)
			if (u-cu)*side < 0 {
				lat = 0 // medial side: flat
			}
			top := m.diaphragm(u, side) - a.depth - 0.07*lat*lat
			tissue = blend(tissue, 0.62, smooth(top-v, 2*px))
		}
		if f.Opacity.has(s) {
			ou := 0.5 + side*0.2 + a.opU
			ov := 0.33 + a.opV
			if f.OpacityZone == Lower {
				ov = 0.58 + a.opV
			}
			tissue += 0.6 * math.Exp(-(sq(u-ou)+sq(v-ov))/(2*sq(0.07)))
		}
		val = blend(val, tissue, lung)
	}
	// Mediastinum and heart (the heart's width is CTR × thoracic width).
	val = blend(val, 0.6, smooth(max(math.Abs(u-0.5)-0.055, max(0.08-v, v-0.6)), 2*px))
	thorax := 2 * (0.195 + a.lungW)
	hw := f.CTR * thorax / 2
	hu, hv := 0.5+0.3*hw, a.dome-0.13
	heart := smooth(ellipseDist(u, v, hu, hv, hw, 0.1+0.3*hw), 2*px) * smooth(v-(a.dome+0.01), px)
	val = blend(val, 0.66, heart)
	// Spine, clavicles and ribs: faint bone.
	val += 0.1 * smooth(math.Abs(u-0.5)-0.035, px) * (0.8 + 0.2*math.Cos(60*v))
	for _, side := range [2]float64{-1, 1} {
		val += 0.16 * smooth(segmentDist(u, v, 0.5+side*0.05, 0.16, 0.5+side*0.3, 0.11)-0.014, px)
		for k := range 7 {
			rv := a.lungTop + 0.04 + float64(k)*0.075 + 0.06*sq((u-0.5)/0.36)
			if math.Abs(u-0.5) > 0.06 && math.Abs(u-0.5) < 0.39 {
				val += 0.03 * smooth(math.Abs(v-rv)-0.012, px)
			}
		}
	}
	// Support devices: metal.
	switch f.Device {
	case Pacemaker:
		gen := max(math.Abs(u-0.74)-0.045, math.Abs(v-0.2)-0.032)
		val = blend(val, 0.98, smooth(gen, px))
		lead := polylineDist(u, v, 0.72, 0.2, 0.6, 0.27, 0.53, 0.42, 0.56, 0.62)
		val = blend(val, 0.95, smooth(lead-max(0.006, 0.7*px), px))
	case Catheter:
		line := polylineDist(u, v, 0.35, 0.0, 0.4, 0.12, 0.455, 0.27, 0.47, 0.44)
		val = blend(val, 0.93, smooth(line-max(0.007, 0.7*px), px))
	}
	return val
}

func (m *film) lateral(u, v float64) float64 {
	f, a, px := m.f, m.a, m.px
	val := 0.04
	val = blend(val, 0.45, smooth(ellipseDist(u, v, 0.5, 0.6, 0.36, 0.56), 3*px))
	val = blend(val, 0.45, smooth(max(math.Abs(u-0.52)-0.1, v-0.2), 2*px))
	dome := a.dome + 0.01 - 0.06*(1-sq((u-0.5)/0.28))
	lung := smooth(ellipseDist(u, v, 0.5, a.lungTop+0.3, 0.27, 0.33), px) * smooth(v-dome, px)
	if lung > 0 {
		tissue := 0.2 + 0.02*math.Sin(29*u+a.marks[3])*math.Sin(21*v+a.marks[0])
		if f.Effusion != None {
			// Fluid in the posterior costophrenic sulcus, rising posteriorly.
			top := dome - 0.7*a.depth - 0.1*max(u-0.5, 0)/0.27
			tissue = blend(tissue, 0.6, smooth(top-v, 2*px))
		}
		if f.Opacity != None {
			ov := 0.33 + a.opV
			if f.OpacityZone == Lower {
				ov = 0.58 + a.opV
			}
			ou := 0.5 + 2*a.opU
			tissue += 0.5 * math.Exp(-(sq(u-ou)+sq(v-ov))/(2*sq(0.07)))
		}
		val = blend(val, tissue, lung)
	}
	// Heart: anterior and inferior; its depth grows with the CTR.
	hw := 0.12 * f.CTR / 0.45
	val = blend(val, 0.62, smooth(ellipseDist(u, v, 0.27+hw, a.dome-0.11, hw, 0.1+0.2*hw), 2*px)*smooth(v-(a.dome+0.01), px))
	// Spine (posterior) with vertebral bodies, sternum (anterior).
	val = blend(val, 0.62, smooth(math.Abs(u-0.78)-0.04, px)*(0.85+0.15*math.Cos(60*v)))
	val += 0.12 * smooth(segmentDist(u, v, 0.2, 0.25, 0.23, 0.6)-0.01, px)
	switch f.Device {
	case Pacemaker:
		gen := max(math.Abs(u-0.2)-0.02, math.Abs(v-0.2)-0.035)
		val = blend(val, 0.98, smooth(gen, px))
		val = blend(val, 0.95, smooth(polylineDist(u, v, 0.2, 0.2, 0.35, 0.35, 0.38, 0.6)-max(0.006, 0.7*px), px))
	case Catheter:
		val = blend(val, 0.93, smooth(polylineDist(u, v, 0.5, 0.0, 0.5, 0.2, 0.45, 0.42)-max(0.007, 0.7*px), px))
	}
	return val
}

func sq(x float64) float64 { return x * x }

// sideOf maps the image side (−1 left, +1 right) of a frontal film to the
// patient's side: the patient's right is on the image's left.
func sideOf(imageSide float64) Side {
	if imageSide < 0 {
		return Right
	}
	return Left
}

// render draws the view at w×h with the study's anatomy and film noise.
func render(f Findings, a anatomy, view View, w, h int, rng *rand.Rand) *image.Gray {
	img := image.NewGray(image.Rect(0, 0, w, h))
	m := film{f: f, a: a, px: 1 / float64(min(w, h))}
	// Patient position and size: sample the anatomy at shifted, scaled
	// coordinates; the pixel size scales with it.
	m.px /= a.scale
	for y := range h {
		for x := range w {
			u := ((float64(x)+0.5)/float64(w)-0.5-a.dx)/a.scale + 0.5
			v := ((float64(y)+0.5)/float64(h)-0.5-a.dy)/a.scale + 0.5
			var val float64
			if view == Lateral {
				val = m.lateral(u, v)
			} else {
				val = m.frontal(u, v)
			}
			val = (val-0.4)*a.contrast + 0.4 + a.exposure + a.noise*rng.NormFloat64()
			img.Pix[y*img.Stride+x] = uint8(math.Round(255 * min(max(val, 0), 1)))
		}
	}
	return img
}
