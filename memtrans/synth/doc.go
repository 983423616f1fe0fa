// Package synth trains and evaluates a report generator on synthetic chest
// films end to end, with nothing downloaded: it writes a data set of films
// with known findings (package data's WriteSynthetic), builds R2Gen's
// tokenizer from its training reports, trains a tiny model with a frozen,
// calibrated visual extractor, writes beam-search reports for the held-out
// films and scores them against the references and against the films' own
// findings.
//
// [Run] does all of it in one call; the quickstart, the report service's
// fallback model and the variant comparison under examples/ use it, so they
// measure the same thing. Its parts are public for a caller with its own
// model or training loop: [Prepare] writes (or reuses) the films and builds
// the tokenizer, [Films.Loader] feeds the training split to a
// memtrans.Trainer, and [Films.Evaluate] scores any model's reports on the
// test split.
//
// A configuration is chosen by [Options]: the architecture's tiny preset
// (memtrans.R2GenTiny, M2Tiny or METransTiny) at the films' size, edited by
// Configure (R2Gen's variants) and ConfigureModel (the whole
// memtrans.ModelConfig: M², METransformer, or an encoder–decoder of the
// caller's own, registered with package arch).
//
// The untrained ResNet stays frozen (no ImageNet weights offline): its
// batch norm and the encoder's visual embedding are calibrated on training
// films first, and its features are computed once per film and cached.
package synth
