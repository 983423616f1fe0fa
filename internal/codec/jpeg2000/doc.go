// Package jpeg2000 decodes JPEG 2000 Part 1 (ITU-T T.800 | ISO/IEC 15444-1)
// code streams, as DICOM stores them for transfer syntaxes
// 1.2.840.10008.1.2.4.90 (the lossless-only syntax) and
// 1.2.840.10008.1.2.4.91 (lossless or lossy): a raw
// code stream (SOC, SIZ, …) or a JP2 file whose code stream box holds one.
// It is pure Go.
//
// # Supported
//
//   - Markers SIZ, COD, COC, QCD, QCC, RGN (ROI maximum shift), POC, PPM, PPT,
//     COM, SOT, SOD, EOC, SOP and EPH; TLM, PLM, PLT and CRG are skipped.
//   - Several tiles and tile-parts, image and tile offsets, component
//     sub-sampling, 1 to 16 bits per sample, signed or unsigned.
//   - All five progression orders, progression changes, precincts, layers.
//   - Every Part 1 code-block style: selective arithmetic coding bypass,
//     context reset, termination on each pass, vertically causal contexts,
//     predictable termination and segmentation symbols.
//   - Reversible (5/3, no quantisation) and irreversible (9/7, scalar derived
//     or expounded quantisation) wavelets, the reversible and irreversible
//     component transforms, DC level shift.
//
// The frame has the size of component 0; a component sub-sampled
// differently is replicated (nearest neighbour) onto that grid. The 9/7
// path computes in float32 with OpenJPEG's synthesis gains, lifting order
// and component transform, and rounds samples to nearest (ties to even)
// before clamping them to their precision: on every lossy test stream, and
// on GDCM's lossy encodings of a real CR, the samples equal those of
// opj_decompress and gdcmconv. Reversible decodes are exact.
//
// # Not supported
//
// Part 2 and later (extended wavelets and component transforms, Part 2
// markers, CAP), high-throughput JPEG 2000 (Part 15, DICOM 1.2.840.10008.1.2.4.201
// to .203), JP2 palettes and components of differing precision or
// signedness return an error wrapping codec.ErrUnsupported.
//
// Predictable termination and segmentation symbols are decoded but not used
// to detect errors. A tile must be complete: one whose data ends before all
// of its packets is an error (every packet takes at least one byte), as is a
// missing tile.
//
// # Limits
//
// The pixel limit is checked on the SIZ marker, before anything
// proportional to the image is allocated. Tile counts are bounded by the
// code stream length (every tile must be present); precinct and code-block
// counts by each tile-component's sample count, before they are allocated;
// (layer, resolution, component) combinations by the tile's bytes; and
// code-block bit-planes (at most 30 with the ROI shift), coding passes,
// Lblock and segment lengths by T.800's own ranges and the data present.
// Coefficients and the frame are allocated only once a tile's packets have
// all been read. Memory is about 10 bytes per sample (the frame, one tile's
// coefficients and one transform scratch buffer) plus the code stream.
//
// # Speed
//
// Tier-1 keeps each code-block's state in two flat arrays with a one-sample
// border (a flag word per sample caching its neighbours' significance and
// signs, and the magnitudes), scanned in stripes of four rows; the MQ
// decoder's registers stay in locals in the coding passes. Code-blocks are
// decoded in parallel on up to GOMAXPROCS goroutines, and the wavelet
// passes are split across rows and columns. On a 2140×1760 lossless CR
// (one thread), about 75% of the CPU time is tier-1 (significance
// propagation 37%, refinement 22%, cleanup 16%, each with its MQ
// decoding), 10% storing code-blocks, 10% the inverse wavelet transform and
// 4% the output.
package jpeg2000
