// Package jpegls decodes JPEG-LS (ITU-T T.87).
package jpegls

import "github.com/radgen/radgen/internal/codec"

// Decode reads one JPEG-LS frame.
func Decode(data []byte, maxPixels int64) (*codec.Frame, error) {
	return nil, codec.ErrUnsupported
}
