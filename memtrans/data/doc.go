// Package data feeds report-generation models: R2Gen's annotation.json
// datasets (IU X-Ray, MIMIC-CXR), R2Gen's tokenizer with its report
// cleaners, batches of images and padded targets, and synthetic chest films
// with known findings for tests, benchmarks and the quickstart.
//
// Reference: Chen et al., "Generating Radiology Reports via Memory-driven
// Transformer", EMNLP 2020 (R2Gen), whose modules/tokenizers.py,
// modules/datasets.py and modules/dataloaders.py this package mirrors.
//
// # Text
//
// [CleanIUXray] and [CleanMIMICCXR] are R2Gen's cleaners byte for byte,
// quirks included: hyphens survive (a character range in R2Gen's regex),
// empty sentences are kept (its filter is always true), every "1. " goes,
// sentences are joined with " . ". A [Tokenizer] holds the vocabulary built
// from the train reports ([BuildTokenizer]: words seen ≥ 3 times for IU X-Ray,
// ≥ 10 for MIMIC-CXR, plus "<unk>", sorted by code point, ids from 1; 0 is
// bos, eos and pad). Encode gives [0, words…, 0] truncated to max_seq_length
// (60 IU X-Ray, 100 MIMIC-CXR) counting the bos; Decode stops at the first 0.
// The tokenizer marshals to stable JSON so a checkpoint can carry it.
//
// # Studies and batches
//
// [ReadAnnotation] parses annotation.json strictly (invalid UTF-8, empty
// reports and missing images are errors naming the study). [NewDataset]
// tokenizes a split; a [Loader] yields batches ([Batch]): images (B, V, 3, H, W)
// float32 through a vision.Transform (R2Gen's: Resize(256), RandomCrop(224),
// flip for train; Resize((224, 224)) otherwise), targets and masks (B, T)
// padded with 0 to the batch's longest sequence. Images are decoded in
// parallel (errgroup, bounded workers), the next batch is prepared while the
// current one is used, and everything random derives from a seed, so runs
// are reproducible.
//
// # Synthetic films
//
// [WriteSynthetic] writes an annotation.json and a folder of PNG films that
// the same loaders read: seeded, at any size, with findings a small model
// can learn (cardiomegaly by cardiothoracic ratio, pleural effusion on
// either side, focal opacity, pneumothorax, support devices, or normal), an
// IU-style report written from them and the 14 CheXpert-style labels.
package data
