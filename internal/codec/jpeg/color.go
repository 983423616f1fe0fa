package jpeg

import (
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// Fixed-point YCbCr to RGB coefficients (JFIF, ITU-R BT.601 full range),
// round(x·2^16), as libjpeg's jdcolor.c uses them.
const (
	ycc16    = 16
	yccCrR   = 91881  // 1.40200
	yccCbB   = 116130 // 1.77200
	yccCrG   = 46802  // 0.71414
	yccCbG   = 22554  // 0.34414
	yccHalf  = 1 << (ycc16 - 1)
	yccComps = 3
)

// YCbCrToRGB converts a three-component frame from YCbCr (as JFIF and DICOM's
// YBR_FULL and YBR_FULL_422 define it) to RGB in place, with libjpeg's
// fixed-point arithmetic and clamping, so the result matches what libjpeg
// and dcmtk give when they convert while decoding.
func YCbCrToRGB(f *codec.Frame) error {
	if f.Components != yccComps || f.Precision < 2 || f.Precision > 16 || len(f.Pix) != f.Width*f.Height*yccComps {
		return fmt.Errorf("jpeg: %w: YCbCr to RGB of a %d-component, %d-bit frame", codec.ErrUnsupported, f.Components, f.Precision)
	}
	maxv := int64(1)<<uint(f.Precision) - 1
	center := (maxv + 1) / 2
	clamp := func(v int64) uint16 { return uint16(min(max(v, 0), maxv)) }
	for i := 0; i+2 < len(f.Pix); i += 3 {
		y := int64(f.Pix[i])
		cb := int64(f.Pix[i+1]) - center
		cr := int64(f.Pix[i+2]) - center
		f.Pix[i] = clamp(y + (yccCrR*cr+yccHalf)>>ycc16)
		f.Pix[i+1] = clamp(y + (-yccCbG*cb+yccHalf-yccCrG*cr)>>ycc16)
		f.Pix[i+2] = clamp(y + (yccCbB*cb+yccHalf)>>ycc16)
	}
	return nil
}
