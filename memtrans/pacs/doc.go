// Package pacs reports on the chest radiographs a PACS receives: a
// [Worker] watches the archive over DICOMweb ([dicomweb.Client]), finds
// new CR and DX studies by QIDO-RS, retrieves their image series by
// WADO-RS, picks the views as [memtrans.StudiesFromDICOMDir] does,
// generates the report with [memtrans.Model.Generate], and stores it
// into the same study as a new series, a DICOM SR ([dicomsr.New]), by
// STOW-RS; with an MLLP address it then sends the report to the RIS as an
// HL7 v2 ORU^R01 ([hl7.NewORU]).
//
// The package sits above memtrans/dicomweb rather than inside it: the
// client is a transport that knows no model, so the report service and
// other programs can use it without the worker's dependencies (the model,
// the SR and HL7 writers).
//
// # Exactly once
//
// The PACS itself is the record of what is done: an SR's series and
// instance UIDs are derived from the study and the model
// ([dicomsr.StudyUIDs]), so before reporting on a study the worker asks
// the PACS (QIDO-RS, the study's series) whether that series is there,
// and an SR stored twice — by a STOW-RS retried after its answer was lost,
// or by a worker killed between storing and noting it — is the same
// instance, which the PACS keeps once. A local state file could disagree
// with the archive (restored from a backup, an SR deleted by a
// radiologist, two workers); the archive cannot disagree with itself. The
// SR is one STOW-RS request of one instance, so a worker stopped at any
// point leaves either the whole SR or none. A store counts only when the
// PACS's answer lists the SR's SOP Instance UID as stored; when the answer
// is an error or does not list it, the worker asks the PACS for the SR
// series before it decides, so an SR the PACS kept in spite of a wrong
// answer is not stored again, and one it did not keep is not taken as
// reported.
//
// The HL7 message is sent only once the SR is stored, so that the RIS
// never holds a report the PACS lacks. A crash between the two must not
// lose the message, and the PACS, where the SR then is, would say the
// study is done: so with MLLP the worker keeps a small journal
// (Config.JournalFile, a JSON Lines file, mode 0600, rewritten whole
// through a renamed temporary file at each change). Before the STOW-RS it
// writes the message there; once the receiver acknowledges it, it removes
// it. At start, and before each search, it goes through the journal: an
// entry whose SR the PACS holds is sent (again, with the same control ID,
// [hl7.ControlID], which receivers use to drop a copy: the message may be
// delivered twice, never lost); an entry whose SR the PACS does not hold
// (a crash before the store) is dropped, and the study is reported on
// afresh. A line of the journal that does not read is logged at error
// level, naming it, and dropped. While the journal holds
// Config.MaxPendingHL7 messages (the receiver unreachable), no new study
// is reported on. The SR's UIDs follow the model's checksum: another model
// (new weights) reports on the studies again, with an SR of its own, so
// Config.Since bounds how far back a new model goes.
//
// A stop (the context of [Worker.Run] done, SIGTERM in the CLI) comes
// between studies: the study in hand finishes within Config.Drain, and is
// otherwise abandoned: its SR, if not yet stored, is not stored (the next
// run reports on it), and its HL7 message, if not yet acknowledged, stays
// in the journal. [Worker.RunOnce] is bounded by
// Config.OnceTimeout (default 1 h), the study in hand included; past it,
// or when its search could not list every study, it returns an error
// wrapping [ErrIncomplete].
//
// # Searching
//
// The worker searches the PACS (QIDO-RS) in pages of Config.PageSize
// studies (default 500), each asked at the offset of the studies listed so
// far, until an empty page, for Config.MaxPages pages at most (default
// 100). A page shorter than asked does not end the search (a PACS may cap
// its pages below the size asked: Orthanc's and dcm4chee's limits are
// configurable); a page listing no study not listed before (a PACS
// ignoring offset) ends it, as does the page cap: both are logged and
// counted, and the studies listed are reported on. A study listed twice is
// reported on once. By default a study waits until its instance count is
// the same at two searches, and at most Config.SettlePolls searches
// (default 10) while it keeps changing. A StudyInstanceUID that is not a
// UID (too long, with a path or control characters in it) is never put in
// a path, logged quoted and cut, and the study left alone.
//
// # Failures
//
// Every failure is classified by its cause.
//
// An unreachable PACS (connection errors, deadlines passed, 408, 429,
// 5xx, an answer broken off, after the client's own retries), or a search
// answer that does not read (not JSON, over the client's limits, an HTML
// page), cuts the round short: the worker waits with exponential backoff
// (Config.Backoff, honouring the PACS's Retry-After up to Backoff.Max) and
// tries again, forever; nothing the PACS answers ends [Worker.Run].
//
// One study failing for a reason that may pass — its retrieval broken off
// or past its deadline, 408, 429 or 5xx about it, 401, 404, its attempt
// past Config.StudyTimeout (default 15 min) — while the PACS answers a
// search (the worker asks it, to tell the two apart) is retried on its
// own: the round goes on with the other studies, and the study waits
// Config.StudyRetry (1 min doubling to 30 min by default) before its next
// attempt. After StudyRetry.Attempts failures (default 8; 3 for 404), or
// Config.StudyMaxAge after its first (default 24 h), it is dead-lettered
// with its last error. Any other failure of a study — a complete answer
// that does not read, 400, 403, 409, a redirect to another origin, a
// header or image that does not decode (a film claiming 65535² pixels, a
// length that runs past the data), no frontal view, more than the bounds
// allow, the PACS refusing the SR for good (409, a failure reason other
// than 0xA7xx and 0x0110) — dead-letters it at once.
//
// An unreachable HL7 receiver holds every message back (Config.Backoff);
// an AR or CR acknowledgement (rejected for reasons unrelated to the
// content, HL7 v2.5 §2.9) holds that message back as a study's failure
// that may pass; an AE or CE (its content in error), or an answer that is
// not its acknowledgement, dead-letters the study at once (its SR stays
// stored).
//
// Dead letters go to [Worker.DeadLetters] and, when Config.DeadLetterFile
// is set, to that file: one JSON line each, the error cut to 1 KiB, the
// file to 64 MiB. The studies it lists are skipped across restarts; a line
// of it that does not read (not JSON, too long, no UID) is logged and
// skipped. The worker stops (Run returns) only when it cannot write its
// own files: the dead letters, the journal, the temporary folder.
//
// # Progress
//
// Each study reported, found reported, retried or dead-lettered, each HL7
// message acknowledged or held back, and each anomaly of the PACS (a
// study listed twice, a count that does not settle, a short page, a
// search cut short, an invalid UID) is logged through the optional
// *slog.Logger with the study's UID; [Worker.Stats] counts them, and
// [Worker.WriteMetrics] writes the counts for Prometheus.
package pacs
