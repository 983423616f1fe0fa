// Package metrics scores generated radiology reports against references
// with the metrics the report-generation papers use: BLEU-1..4, ROUGE-L and
// CIDEr-D equal to the coco-caption scorers shipped with R2Gen, METEOR
// (package meteor: the METEOR 1.5 jar's exact, stem and synonym modules,
// equal to the jar; coco-caption's jar also runs a paraphrase module, so
// the scores are named by their modules) and CheXpert-style clinical
// efficacy (package chexpert).
//
// # Equal to coco-caption
//
// [BLEU], [ROUGEL] and [CIDErD] reproduce pycocoevalcap as vendored by
// R2Gen (cuhksz-nlp/R2Gen, modules/metrics.py), number for number
// (tests compare every corpus and per-sentence value of
// ../shared/golden/metrics/cases.json, or $RADGEN_GOLDEN_METRICS, within
// 1e-6; the differences are below 1e-15):
//
//   - tokenisation as the scorers do it: Python's str.split() for BLEU and
//     CIDEr-D, split(" ") for ROUGE-L (doubled spaces give empty tokens);
//     no PTB tokenizer, as in R2Gen;
//   - BLEU: clipped n-gram counts, the closest reference length (ties to the
//     shorter), corpus-level sums, smoothing 1e-15/1e-9 (which also makes an
//     equal-length hypothesis pay a brevity factor of about 1 − 2.5e-10);
//   - ROUGE-L: LCS, precision and recall maximised separately over
//     references, β = 1.2, mean over samples;
//   - CIDEr-D: document frequencies from the references of the scored set,
//     clipped tf-idf cosine per order, Gaussian length penalty σ = 6 on the
//     scorer's bigram-count "length", ×10, mean over samples;
//   - means as numpy computes them (pairwise summation).
//
// Inputs are what R2Gen passes: references and hypotheses already cleaned
// by its tokenizer (memtrans/data). refs[i] holds one or more references of
// hyps[i].
//
// # One evaluator
//
// [Evaluator] computes everything at once, in parallel (golang.org/x/sync
// errgroup, bounded by [WithConcurrency]), stops when its context is done,
// and returns [Scores] with the METEOR variant's name beside its number and
// CE as a [chexpert.Efficacy]. For reports produced one at a time, an
// [Accumulator] takes samples as they come and computes the corpus-level
// parts at the end.
//
// Reports the evaluator labels for CE are the first reference of each
// sample and the hypothesis. METEOR hypotheses get R2Gen's wrapper
// cleaning ([meteor.CleanHypothesis]).
package metrics
