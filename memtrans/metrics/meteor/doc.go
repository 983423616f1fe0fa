// Package meteor computes METEOR in Go as the METEOR 1.5 jar computes it,
// with the jar's own English data, for every module the jar can run here:
// exact, stem and synonym. R2Gen and coco-caption run the jar as
// `java -jar meteor-1.5.jar - - -stdio -l en -norm`, whose default adds a
// fourth module, paraphrase, that this package does not have.
//
// Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific
// Translation Evaluation for Any Target Language", WMT 2014; the jar's
// source (github.com/cmu-mtlab/meteor, edu.cmu.meteor: Aligner,
// MeteorScorer, MeteorStats, Normalizer, SynonymDictionary), which this
// package ports.
//
// # Equal to the jar
//
// [New] computes what `java -jar meteor-1.5.jar - - -stdio -l en -norm -m
// "exact stem synonym"` computes, and [WithModules] any other module list
// of the jar's -m. The tests hold radgen to the jar built from source within
// 1e-6 per segment and per corpus (testdata/jar: synthetic reports and
// 2,955 real IU X-Ray reports; the measured differences are below 3e-16):
//
//   - Normalisation of both sides as -norm does ([Normalize]), with the
//     jar's nonbreaking prefixes, then lower case as Java's toLowerCase.
//   - The jar's data, embedded in data/: its English function words
//     ([DefaultFunctionWords]), and its synonym tables built from WordNet
//     3.0 ([EnglishWordNet]) with WordNet's exception lists and suffix rules.
//   - English "rank" parameters α 0.85, β 0.20, γ 0.60, δ 0.75; module
//     weights 1.0, 0.6, 0.8 by position in the module list, as the jar gives
//     them (so -m "exact synonym" weighs synonym matches 0.6).
//   - Candidate matches module by module (exact; stem: different words with
//     the same Snowball English stem, [EnglishStem]; synonym: different words
//     sharing a synset), words compared by Java hash code as the jar
//     compares them, one-to-one matches fixed in advance, and the jar's beam
//     search (beam 40) with its ranking: more matches, fewer chunks, less
//     distance. Two quirks of that search are kept because they decide
//     alignments: the search counts a stem or synonym match as zero (its
//     weight 0.5 is added to an int), so an ambiguous stem/synonym match is
//     dropped whenever dropping it saves a chunk — with all three modules,
//     "effusions" against "effusion" scores 0, since both the stem and the
//     synonym module match it; and sibling paths inherit each other's
//     distance.
//   - Segment statistics, best reference by score, P, R, Fmean, the
//     fragmentation penalty, and the corpus score computed from statistics
//     summed over all segments as the jar's EVAL sums them ([Stats.Add]: the
//     chunk of a segment matched whole in one chunk is left out), which is
//     the corpus number coco-caption reports, not the mean of segment scores.
//
// # How far from coco-caption's METEOR
//
// The paraphrase module is missing: the jar's English default also matches
// phrases from its paraphrase table (weight 0.6), which is not available
// here. Every paraphrase match the jar would find is missing, so radgen's
// number is usually lower than coco-caption's; by how much depends on the
// text and could not be measured (the table is not available to the
// project). [Scorer.Name] states the modules in use, e.g. "METEOR
// (exact+stem+synonym; no paraphrase)", and radgen reports that name next to
// every METEOR number; it must not be reported as coco-caption's METEOR.
//
// Other limits, none of which occur in reports: a line that coco-caption
// would send with "|||" in a reference or a newline anywhere changes the
// jar's input, and is scored here as written; Java's final-sigma rule of
// toLowerCase is not applied.
//
// A [Scorer] is immutable and safe for concurrent use.
package meteor
