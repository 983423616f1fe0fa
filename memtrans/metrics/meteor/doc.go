// Package meteor computes METEOR in Go, following the METEOR 1.5 jar that
// R2Gen runs (`java -jar meteor-1.5.jar - - -stdio -l en -norm`) as far as
// its data allows, and saying where it cannot.
//
// Reference: M. Denkowski and A. Lavie, "Meteor Universal: Language Specific
// Translation Evaluation for Any Target Language", WMT 2014; the jar's
// source (edu.cmu.meteor: Aligner, MeteorScorer, Normalizer,
// SynonymDictionary), which this package ports.
//
// # What is the same as the jar
//
//   - Normalisation of both sides as -norm does ([Normalize]), then
//     whitespace tokens.
//   - English "rank" parameters α 0.85, β 0.20, γ 0.60, δ 0.75 and module
//     weights exact 1.0, stem 0.6, synonym 0.8.
//   - Candidate matches module by module (exact; stem: different words with
//     the same Snowball English stem; synonym: different words sharing a
//     WordNet synset, through WordNet's exception lists or the jar's suffix
//     rules), one-to-one matches fixed in advance, and the jar's beam search
//     (beam 40) with its ranking: more matches, fewer chunks, less distance.
//     Two quirks of that search are kept because they decide alignments: the
//     search counts a stem or synonym match as zero (its weight 0.5 is added
//     to an int), so an ambiguous stem/synonym match is dropped whenever
//     dropping it saves a chunk; and sibling paths inherit each other's
//     distance.
//   - Segment statistics, best reference by score, P, R, Fmean, the
//     fragmentation penalty, and the corpus score computed from statistics
//     summed over all segments (the jar's final EVAL number, which R2Gen
//     reports), not the mean of segment scores.
//
// # Documented deviation from the jar
//
// The number is not the jar's METEOR and must not be reported as such:
//
//   - No paraphrase module. The jar's English default matches phrases from
//     its paraphrase table (weight 0.6); that table is not available. Every
//     paraphrase match the jar would find is missing here, so scores are
//     usually lower than the jar's; how much lower depends on the text and
//     has not been measured against the jar here.
//   - Synonyms only when a WordNet database is given ([WithWordNet],
//     [WithWordNetDir]); without one the synonym module is off. With one,
//     synsets come from the database's index files (WordNet 3.0 from
//     Debian's wordnet-base, or 3.1) instead of the jar's precomputed
//     synonym table, so a few synonym pairs may differ.
//   - Function words: the jar's English list is not available; this package
//     uses its own list of closed-class words and punctuation
//     ([DefaultFunctionWords]). This changes δ weighting slightly.
//   - The -norm abbreviation list is shorter than Moses' (see [Normalize]).
//   - The jar compares words and stems by Java hash code; here strings are
//     compared, so hash collisions (vanishingly rare) cannot cause matches.
//   - Module weights are tied to the module, not to its position in the
//     module list (the jar shifts weights when a module is left out).
//
// [Scorer.Name] states the modules in use, e.g.
// "METEOR (exact+stem; no synonym, no paraphrase)"; radgen reports that name
// next to every METEOR number.
//
// A [Scorer] is immutable and safe for concurrent use.
package meteor
