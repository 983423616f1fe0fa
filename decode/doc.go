// Package decode turns a model's next-token log-probabilities into reports:
// greedy decoding, beam search and sampling, with the exact semantics of the
// published R2Gen code (and, as an option, of the Meshed-Memory Transformer's
// beam search). It knows nothing of models: it drives any [Model], a batch of
// decoding rows that the model steps and reorders. A strategy ([Greedy],
// [BeamSearch], [Sample]) is a settings struct whose Decode method returns
// each study's [Hypothesis] values; [Recompute] turns a model that can only
// score whole prefixes into a [Model], and [Vote] picks one of a study's
// candidate reports by metric-based voting. It is not a tokenizer
// (memtrans/data has one) and holds no weights: encoding the images and
// running the network are the model's.
//
// References:
//   - Chen, Song, Chang and Wan, "Generating Radiology Reports via
//     Memory-driven Transformer", EMNLP 2020 (R2Gen). Decoding code:
//     cuhksz-nlp/R2Gen modules/att_model.py (_sample, _sample_beam),
//     modules/caption_model.py (beam_search, sample_next_word),
//     modules/utils.py (penalty_builder, repeat_tensors); these are the
//     self-critical.pytorch routines (ruotianluo/self-critical.pytorch).
//   - Cornia, Stefanini, Baraldi and Cucchiara, "Meshed-Memory Transformer
//     for Image Captioning", CVPR 2020. Code: aimagelab/meshed-memory-transformer
//     models/beam_search/beam_search.py.
//   - Vijayakumar et al., "Diverse Beam Search", AAAI 2018 (the groups and λ
//     of [BeamSearch]).
//   - Wu et al., "Google's Neural Machine Translation System", 2016 (the
//     length penalty of [WuPenalty]).
//   - Holtzman et al., "The Curious Case of Neural Text Degeneration", ICLR
//     2020 (nucleus sampling, [Sample].TopP).
//
// # Rows
//
// A model is started by its owner on B studies (encoded images) and handed to
// a strategy with one row per study. Every row is one hypothesis being
// decoded. Rows are numbered study-major, interleaved as R2Gen's
// utils.repeat_tensors lays out its beams:
//
//	row = study·k + j    (0 ≤ j < k)
//
// where k is the beam size (beam search; with diversity groups
// j = group·(k/groups) + beam-in-group) or the number of samples per study
// ([Sample].N). The first [Model.Step] feeds the begin-of-sequence token to the
// B study rows; a strategy then calls [Model.Reorder] to expand them to B·k
// rows, and after that whenever beams are reselected. A model that shares
// per-study data among rows (R2Gen's cross-attention keys and values) keeps a
// row→study map and gathers it in Reorder, as [Recompute] does.
//
// Log-probabilities are float32, row-major [rows × V] where V is
// [Model.VocabSize]. A Step must write normalised log-probabilities (≤ 0,
// as log_softmax gives); beam search's early stop relies on it.
//
// # Strategies
//
// [Greedy], [BeamSearch] and [Sample] are plain settings structs; each has a
// Decode method and satisfies [Strategy]. The results are [Hypothesis] values,
// best first per study. Decoding allocates its buffers once per call from a
// pool and nothing per step: the strategies add no allocation per token.
//
// Every strategy checks its context before each step, passes it to the model,
// and returns ctx.Err() promptly once it is done.
//
// # R2Gen semantics, and where this package departs from them
//
// Beam search ([BeamSearch], R2Gen style) follows caption_model.beam_search:
// at step 0 only beam 0 exists; candidates are beam sum + log-probability;
// the top k by value are kept (beam = index / V, word = index % V); a beam
// whose new word is EOS, and every beam at the last step, is saved with
// p = penalty(length, beam sum) and then kept alive with 1000 subtracted
// from its running sum; the result is the saved beams sorted by p,
// descending, stably. block_trigrams does not exist in beam search (R2Gen
// applies it only in greedy decoding and sampling).
//
// Ties. torch.sort on the CPU without stable=True runs std::sort (introsort,
// not stable), so the order of exactly equal candidates is an accident of
// libstdc++. This package breaks every tie by the lower flat index (lower
// beam, then lower word id), as torch.sort(stable=True) does; greedy
// decoding takes the first maximum, as torch.max does. Exact ties between
// the top candidates practically never occur with a real model's float32
// outputs; they do in hand-made tables, which is why the rule is fixed.
// Candidates are summed in float32, as torch does, so that near-ties
// resolve the same way.
//
// M² semantics ([M2]) follow beam_search.py: finished beams keep their score
// as the single candidate (word 0), every other word of theirs scoring -999;
// the beams are ranked by their final scores. (With a -Inf log-probability
// from the model, M²'s seq_mask·candidate would make a finished beam's
// candidate NaN; here it stays its score.)
//
// Deliberate departures, none of which changes a result of R2Gen's defaults:
//   - Early stop. R2Gen always runs max_seq_length beam steps. With the
//     identity length penalty and no negative diversity λ, no saved or
//     future beam can beat a saved one once every running sum is ≤ its p
//     (log-probabilities are ≤ 0, so sums only fall, and a later equal score
//     sorts after an earlier one), so [BeamSearch] stops there with the same
//     hypotheses. M²'s search stops once every beam has finished. FullLength
//     restores the fixed step count (benchmarks).
//   - Diversity groups. R2Gen's own code cannot run group_size > 1: its
//     add_diversity calls self.repeat_tensor, which no class defines, at the
//     second step of group 1 (self-critical.pytorch calls
//     utils.repeat_tensors there). The self-critical code also staggers the
//     groups: group g starts g steps late, so at its step t it penalises the
//     position-t words of the earlier groups' beams as they stand g steps
//     later, after reselection. A batch of rows that steps in lockstep
//     cannot lag some rows behind others, so here every group takes step t
//     together and group g is penalised by the words that groups 0..g-1
//     chose at step t, as in Algorithm 1 of the DBS paper. The two agree
//     without groups and differ in general with them.
//   - R2Gen's beam search applies log_softmax(x/T) again to every step but
//     the first (idempotent at T = 1); it is skipped at T = 1.
//   - beam_size = 1 in R2Gen silently samples (sample_method 'beam_search'
//     falls through to multinomial sampling, with block_trigrams on by
//     default). BeamSearch{Size: 1} is a width-1 beam search; R2Gen's
//     behaviour is Sample{BlockTrigrams: true}.
//   - With sample_n > 1, R2Gen blocks trigrams only in the first batch_size
//     rows (its loop runs over batch_size); [Sample] blocks them in every row.
//   - R2Gen's suppress_UNK needs a `vocab` attribute its models do not have,
//     so it is never active; it is not offered.
//   - A NaN or +Inf log-probability from the model is an error ([ErrModel]),
//     where torch would rank NaN first.
//
// # Expert voting
//
// METransformer (Wang et al., CVPR 2023) decodes one candidate report per
// expert and picks one by metric-based voting: [Vote] scores each candidate
// against the study's other candidates with a metric the caller supplies
// (CIDEr-D or BLEU from memtrans/metrics, say; this package imports no model
// or metric) and keeps the best.
package decode
