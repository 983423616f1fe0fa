// Package jpeg decodes the JPEG processes that DICOM pixel data uses beyond
// what image/jpeg reads (ITU-T T.81 | ISO/IEC 10918-1), in pure Go:
//
//   - Lossless, process 14 (SOF3, transfer syntaxes 1.2.840.10008.1.2.4.57
//     and …4.70): every selection value 1–7, 2 to 16 bits per sample, point
//     transform, 1 to 4 components in one interleaved scan or one scan per
//     component, restart intervals of whole lines (as libjpeg requires),
//     and the 16-bit difference category 16 (T.81 Annex H).
//   - Extended sequential DCT with Huffman coding, 8 and 12 bits (SOF1,
//     …4.51), baseline (SOF0, …4.50) and progressive DCT with Huffman
//     coding, 8 and 12 bits (SOF2, the retired …4.55): 1 to 4 components
//     with any sampling factors, interleaved or not, spectral selection and
//     successive approximation, restart intervals. The inverse
//     DCT is libjpeg's accurate integer one ("islow", dcmtk's default) with
//     its rounding and range limiting, so 8- and 12-bit grey images decode
//     to the same values as libjpeg and dcmtk; subsampled chroma is upsampled
//     with libjpeg's triangular filter for 2:1 and 2:1×2:1 factors.
//
// Every process is checked against dcmtk's dcmdjpeg or libjpeg's djpeg on
// the files in testdata: lossless frames and 8- and 12-bit grey DCT frames
// decode bit for bit the same.
//
// Colour components are returned as coded: Decode does not convert YCbCr to
// RGB. YCbCrToRGB does, with libjpeg's fixed-point arithmetic, for a caller
// whose photometric interpretation (YBR_FULL, YBR_FULL_422) asks for it;
// with it, 4:2:0 and 4:2:2 colour images decode to the same RGB values as
// libjpeg's djpeg.
//
// Hierarchical (SOF5–7) and arithmetic-coded (SOF9–15, DAC) frames, frames
// whose height a DNL marker gives, lossless frames with subsampled
// components and lossless restart intervals that end inside a line return an
// error wrapping codec.ErrUnsupported that names what was found.
//
// # DICOM pixel data
//
// The caller passes one frame's code stream: the concatenated fragments of
// that frame (PS3.5 A.4). Frame.Precision is the code stream's sample
// precision, which may exceed Bits Stored (dcmtk codes 10 of 16 bits as a
// 16-bit lossless frame): the stored value is the low Bits Stored bits, to be
// sign-extended from there when Pixel Representation is 1, since JPEG knows
// no signedness (Frame.Signed is always false). Decode accepts any selection
// value under either lossless transfer syntax.
//
// # Limits
//
// Decode checks every segment length, table, component count and sampling
// factor, and Huffman code sets, and refuses a frame over the caller's pixel
// limit (codec.CheckSize) before allocating anything proportional to it.
// The memory it allocates is the frame itself (width × height × components
// uint16 samples), plus, for a subsampled component, that component's plane,
// and for a progressive frame its coefficients (64 int16 per block, refused
// beyond twice the pixel limit), besides a few fixed-size tables.
// Truncated or corrupt data returns an error wrapping codec.ErrFormat; Decode
// never panics on bad input.
package jpeg
