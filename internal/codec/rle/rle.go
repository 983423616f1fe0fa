// Package rle decodes one frame of DICOM RLE Lossless pixel data (transfer
// syntax 1.2.840.10008.1.2.5, PS3.5 Annex G): a 64-byte header giving up to
// 15 segment offsets, then one PackBits-compressed segment per byte plane,
// the most significant byte of each sample first, sample after sample.
package rle

import (
	"encoding/binary"
	"fmt"

	"github.com/radgen/radgen/internal/codec"
)

// Decode reads one RLE frame of width×height pixels of the given samples
// per pixel and bits allocated (8 or 16). It refuses, before allocating, a
// frame of more than maxPixels samples. The result is interleaved, with
// Precision equal to bitsAllocated and Signed false: the caller knows the
// Bits Stored and Pixel Representation of the data set.
func Decode(data []byte, width, height, samples, bitsAllocated int, maxPixels int64) (*codec.Frame, error) {
	if err := codec.CheckSize(width, height, samples, maxPixels); err != nil {
		return nil, err
	}
	if bitsAllocated != 8 && bitsAllocated != 16 {
		return nil, fmt.Errorf("%w: RLE of %d bits allocated", codec.ErrUnsupported, bitsAllocated)
	}
	bytesPer := bitsAllocated / 8
	nseg := samples * bytesPer
	if nseg > 15 {
		return nil, fmt.Errorf("%w: RLE of %d samples of %d bits needs %d segments", codec.ErrUnsupported, samples, bitsAllocated, nseg)
	}
	if len(data) < 64 {
		return nil, fmt.Errorf("%w: RLE header of %d bytes", codec.ErrFormat, len(data))
	}
	if n := int(binary.LittleEndian.Uint32(data)); n != nseg {
		return nil, fmt.Errorf("%w: RLE frame of %d segments, want %d", codec.ErrFormat, n, nseg)
	}
	var off [16]int
	for i := range nseg {
		o := binary.LittleEndian.Uint32(data[4+4*i:])
		if o < 64 || int64(o) > int64(len(data)) || (i > 0 && int(o) < off[i-1]) {
			return nil, fmt.Errorf("%w: RLE segment %d at offset %d of %d bytes", codec.ErrFormat, i, o, len(data))
		}
		off[i] = int(o)
	}
	off[nseg] = len(data)
	npix := width * height
	f := &codec.Frame{Width: width, Height: height, Components: samples, Precision: bitsAllocated,
		Pix: make([]uint16, npix*samples)}
	plane := make([]byte, npix)
	for s := range nseg {
		if err := unpack(plane, data[off[s]:off[s+1]]); err != nil {
			return nil, fmt.Errorf("segment %d: %w", s, err)
		}
		comp, byteIdx := s/bytesPer, s%bytesPer
		shift := uint(8 * (bytesPer - 1 - byteIdx))
		dst := f.Pix[comp:]
		if samples == 1 {
			for i, b := range plane {
				dst[i] |= uint16(b) << shift
			}
			continue
		}
		for i, b := range plane {
			dst[i*samples] |= uint16(b) << shift
		}
	}
	return f, nil
}

// unpack decodes one PackBits segment into dst, which it must fill exactly
// (trailing bytes after dst is full, a padding byte for instance, are
// ignored as PS3.5 G.3.1 allows).
func unpack(dst, src []byte) error {
	o := 0
	for i := 0; o < len(dst); {
		if i >= len(src) {
			return fmt.Errorf("%w: RLE segment ends after %d of %d bytes", codec.ErrFormat, o, len(dst))
		}
		n := int(int8(src[i]))
		i++
		switch {
		case n >= 0: // n+1 literal bytes
			n++
			if i+n > len(src) || o+n > len(dst) {
				return fmt.Errorf("%w: RLE literal run of %d bytes overruns", codec.ErrFormat, n)
			}
			copy(dst[o:o+n], src[i:i+n])
			i += n
			o += n
		case n != -128: // 1-n copies of the next byte
			n = 1 - n
			if i >= len(src) || o+n > len(dst) {
				return fmt.Errorf("%w: RLE replicate run of %d bytes overruns", codec.ErrFormat, n)
			}
			b := src[i]
			i++
			for k := range n {
				dst[o+k] = b
			}
			o += n
		}
	}
	return nil
}
