// Package vision: image preprocessing and visual extractors.
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
// # Layout
//
// Pixels: sample (x, y, c) at Pix[(y*W+x)*C+c].
// Image:  sample (c, y, x) at Pix[(c*H+y)*W+x]. A batch of B studies of V views
// is the concatenation of B·V images, the tensor (B, V, 3, H, W).
package vision
