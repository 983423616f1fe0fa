// Package codec holds what radgen's image codecs for DICOM pixel data share:
// the decoded frame and the errors they return. Each codec lives in a
// subpackage (jpeg, jpegls, jpeg2000) with a Decode function of the form
//
//	func Decode(data []byte, maxPixels int64) (*codec.Frame, error)
//
// that reads one compressed frame from data and refuses, before allocating
// anything proportional to the image, a frame whose declared width × height ×
// components exceeds maxPixels.
package codec

import (
	"errors"
	"fmt"
)

// Frame is one decoded image: Components samples per pixel, interleaved, rows
// top to bottom. Pix holds each sample's stored value in its low Precision
// bits; for signed data (Signed) the value is two's complement in Precision
// bits, so a caller sign-extends it.
type Frame struct {
	Width, Height int
	Components    int
	Precision     int // bits per sample, 1 to 16
	Signed        bool
	Pix           []uint16 // len == Width*Height*Components
}

// Errors shared by the codecs; each codec wraps them with what it found.
var (
	// ErrFormat reports a malformed or truncated code stream.
	ErrFormat = errors.New("codec: malformed data")
	// ErrUnsupported reports a valid code stream that uses a feature the
	// codec does not implement.
	ErrUnsupported = errors.New("codec: unsupported feature")
	// ErrTooLarge reports a frame whose declared size exceeds the caller's
	// pixel limit.
	ErrTooLarge = errors.New("codec: image exceeds the pixel limit")
)

// CheckSize returns an error wrapping ErrTooLarge or ErrFormat unless
// width, height and components are positive and their product is at most
// maxPixels (maxPixels <= 0 means no limit beyond the address space).
func CheckSize(width, height, components int, maxPixels int64) error {
	if width <= 0 || height <= 0 || components <= 0 {
		return fmt.Errorf("%w: image size %d×%d×%d", ErrFormat, width, height, components)
	}
	n := int64(width) * int64(height)
	if n/int64(height) != int64(width) || n*int64(components)/int64(components) != n {
		return fmt.Errorf("%w: image size %d×%d×%d overflows", ErrTooLarge, width, height, components)
	}
	n *= int64(components)
	if maxPixels > 0 && n > maxPixels {
		return fmt.Errorf("%w: %d×%d×%d samples > limit %d", ErrTooLarge, width, height, components, maxPixels)
	}
	if maxPixels <= 0 && n > 1<<40 {
		return fmt.Errorf("%w: %d samples", ErrTooLarge, n)
	}
	return nil
}
