// Package vision turns chest films into visual features: image and DICOM
// decoding, R2Gen's preprocessing, torchvision-compatible ResNets (the R2Gen
// extractor) and a ViT with expert tokens (METransformer).
//
// A service that writes reports decodes each view ([DecodeFile],
// [DecodeDICOMFile]), prepares it ([TestTransform], [Transform.Apply]),
// stacks a batch ([StackStudies]) and runs an [Extractor]; memtrans does
// all of it for a loaded model. The package reads images and their
// headers ([ReadDICOMInfo]); it does not search folders or talk to a PACS
// (memtrans and memtrans/dicomweb do), and it holds no language model.
//
// References: He et al., "Deep Residual Learning for Image Recognition",
// CVPR 2016; Dosovitskiy et al., "An Image is Worth 16x16 Words", ICLR 2021;
// Wang et al., "METransformer", CVPR 2023.
//
// # Preprocessing
//
// Images enter as PNG or JPEG bytes ([Decode], [DecodeFile]) or as any
// [image.Image] ([FromImage]) and become [Pixels]: 8-bit samples, interleaved
// row-major H×W×C with C = 1 (gray) or C = 3 (RGB), the equivalent of PIL's
// Image.convert("RGB") (a gray image keeps one channel; it stands for three
// equal ones and every operation gives the same result as on its RGB copy,
// three times faster). A pixel limit ([WithMaxPixels]) refuses decompression
// bombs from the header alone, before any pixel is decoded.
//
// A [Transform] turns Pixels into an [Image]: float32, channel-major C×H×W,
// normalised with the ImageNet mean and standard deviation, the tensor that
// torchvision's ToTensor + Normalize produce. [TestTransform] is R2Gen's
// evaluation pipeline, Resize((224, 224)); [TrainTransform] is its training
// pipeline, Resize(256) on the shorter side, RandomCrop(224) and a horizontal
// flip with probability 0.5, drawn from a caller's seeded math/rand/v2 source.
//
// Resizing ([Resize]) reproduces Pillow's bilinear resampling exactly: a
// triangle filter whose support widens by the scale factor when downsampling
// (antialiasing), separable, horizontal pass first, with Pillow's 22-bit
// fixed-point coefficients and its rounding back to 8 bits after each pass.
// On the parity images (torchvision 0.14 + Pillow) the output is bit-identical.
//
// All functions are safe for concurrent use on distinct values.
//
// DICOM files ([DecodeDICOM]) are rendered to the same 8-bit Pixels: rescale
// slope and intercept, the file's VOI window (LINEAR, LINEAR_EXACT, SIGMOID,
// or a VOI LUT sequence; min/max when there is none), MONOCHROME1 inverted,
// with every length checked and the pixel limit applied before pixel data is
// read. [DecodeDICOMFrame] returns the stored values of the first frame
// instead (before rescale and window), for checking and for callers that
// window themselves. [ReadDICOMInfo] reads the header alone (patient, study
// and view attributes, [DICOMInfo]), without the pixel data; [DICOMStudy]
// is the set of views of one study that memtrans builds from it. Both
// decoders read Part 10 files and bare data sets, native data
// (8–32 bits allocated, signed or not, monochrome, RGB and YBR) and the
// common compressed syntaxes in pure Go: RLE Lossless, JPEG baseline,
// extended 12-bit and lossless (process 14), JPEG-LS lossless and
// near-lossless. A 16-bit chest film costs about 2 bytes a pixel as stored
// values, plus its compressed bytes, and one more byte a pixel rendered.
//
// # Extractors
//
// [ResNet] is torchvision's ResNet (BasicBlock or Bottleneck, any block
// counts) with its state_dict names; [Extractor] is R2Gen's VisualExtractor
// around it (names model.0 … model.7), returning patch features (B, V·h·w, C)
// with the views concatenated along the patch axis (two 224² views give 98
// patches) and averaged features (B, V·C). Inference and training run the
// same ops (training with batch statistics); on the CPU, inference's batch
// norms are folded into the convolutions by the engine, once per weight.
// Inference is safe for concurrent use.
//
// # Layout
//
// Pixels: sample (x, y, c) at Pix[(y*W+x)*C+c].
// Image:  sample (c, y, x) at Pix[(c*H+y)*W+x]. A batch of B studies of V views
// is the concatenation of B·V images, the tensor (B, V, 3, H, W).
package vision
