// Package chexpert labels radiology reports with the 14 CheXpert
// observations and computes clinical efficacy (CE) as R2Gen does.
//
// Reference: J. Irvin et al., "CheXpert: A Large Chest Radiograph Dataset
// with Uncertainty Labels and Expert Comparison", AAAI 2019, and its labeler
// (github.com/stanfordmlgroup/chexpert-labeler, MIT licence), whose mention
// and unmention phrase lists are embedded here as data (phrases/, with the
// licence notice beside them; [LicenseNotice]).
//
// # Pipeline
//
// [Labeler.Label] follows the labeler's stages: clean the report
// (lower-case, "and/or" → "or", "a/b" → "a or b", spaces after periods and
// commas); split sentences; find mention phrases as regular expressions
// anywhere in a sentence (so "effusion" also finds "effusions", and
// "air-space disease" is its own phrase), skipping matches that overlap an
// unmention phrase ("massive" for "mass", "over the heart" for "the heart");
// classify each mention as negative, uncertain or positive; aggregate per
// report: several mentions of one observation resolve negative+uncertain →
// uncertain, negative+positive → positive, uncertain+positive → positive;
// "chf" or "heart failure" (not negated) adds an uncertain Cardiomegaly; No
// Finding is positive unless some observation other than Support Devices is
// positive or uncertain (the labeler's No Finding phrases, such as
// "emphysema" or "granuloma", only veto No Finding).
//
// # Negation and uncertainty: surface rules instead of a parser
//
// The CheXpert labeler parses each sentence (BLLIP parser, Stanford
// universal dependencies) and matches Semgrex patterns on the dependency
// graph, in three passes: pre-negation uncertainty, negation, post-negation
// uncertainty. This package keeps the three passes and their precedence but
// replaces the graph patterns by NegEx-style surface rules derived from the
// same pattern files: a trigger phrase ("no", "without", "cannot exclude",
// "may", "X is normal", "X has resolved", "X or Y", "stable heart size", …)
// affects a mention a few words after it (or before it), unless a scope
// terminator ("but", "however", "which", "with", a semicolon, or a verb
// opening a new clause) lies between them; pseudo-triggers such as "no
// change" are ignored. Every rule is listed with its source pattern in
// rules.go, and 80+ hand-written sentences in the tests pin the behaviour.
//
// What surface rules cannot do that the parser-based labeler does:
//
//   - Attach a trigger to the word it grammatically modifies. Rules count
//     words, the parser follows edges: in "no effusion is seen on the left
//     and the right costophrenic angle is blunted", or a negation separated
//     from its noun by a long modifier or relative clause, the scope here is
//     a guess from distance and stop words, there a fact of the parse.
//   - Resolve coordination and propagation exactly. The labeler propagates
//     a negation through conjuncts it parsed ("no effusion, consolidation or
//     pneumothorax") and stops at conjuncts that belong to another clause;
//     here a trigger reaches across up to 10 words of a list and stops only
//     at the stop words above.
//   - Use lemmas and parts of speech. Patterns such as "XXX suspected" (a
//     past participle) or "normal appearance of XXX" rely on tags and
//     lemmas of any inflection; here each inflection is spelled out, and an
//     unlisted one is missed.
//   - Tell which noun a modifier or verb belongs to when the words are
//     ambiguous ("enlarged heart with normal mediastinum" works only
//     because "with" is a stop word; "heart and lungs are unremarkable but
//     for a small effusion" does not parse as it reads).
//
// So the labels agree with the CheXpert labeler on the common phrasings of
// chest radiograph reports (the test sentences) but not on every report;
// CE numbers from this package are labelled as such and are not
// interchangeable with numbers from the CheXpert or CheXbert labelers.
//
// # Clinical efficacy
//
// [ClinicalEfficacy] is R2Gen's compute_ce.py: NaN → 0, -1 → 0 (only
// positive counts), then scikit-learn's micro and macro precision, recall
// and F1 over the 14 observations (a zero denominator gives 0).
//
// A [Labeler] is immutable and safe for concurrent use.
package chexpert
