// Package pacs reports on the chest radiographs a PACS receives: a
// [Worker] watches the archive over DICOMweb ([dicomweb.Client]), finds
// new CR and DX studies by QIDO-RS, retrieves their image series by
// WADO-RS, picks the views as [memtrans.StudiesFromDICOMDir] does,
// generates the report with [memtrans.Model.Generate], and stores it
// into the same study as a new series, a DICOM SR ([dicomsr.New]), by
// STOW-RS; with an MLLP address it also sends the report to the RIS as an
// HL7 v2 ORU^R01 ([hl7.NewORU]).
//
// The package sits above memtrans/dicomweb rather than inside it: the
// client is a transport that knows no model, so the report service and
// other programs can use it without the worker's dependencies (the model,
// the SR and HL7 writers).
//
// # Exactly once
//
// The PACS itself is the record of what is done; the worker keeps no
// state of its own beyond the dead-letter file. An SR's series and
// instance UIDs are derived from the study and the model
// ([dicomsr.StudyUIDs]), so before reporting on a study the worker asks
// the PACS (QIDO-RS, the study's series) whether that series is there,
// and an SR stored twice — by a STOW-RS retried after its answer was lost,
// or by a worker killed between storing and noting it — is the same
// instance, which the PACS keeps once. A local state file could disagree
// with the archive (restored from a backup, an SR deleted by a
// radiologist, two workers); the archive cannot disagree with itself. The
// SR is one STOW-RS request of one instance, so a worker stopped at any
// point leaves either the whole SR or none. The HL7 message is sent before
// the SR is stored: a crash between the two sends it again on restart,
// with the same control ID ([hl7.ControlID]), which receivers use to drop
// the copy; the SR is never missing an ORU. The SR's UIDs follow the
// model's checksum: another model (new weights) reports on the studies
// again, with an SR of its own, so Config.Since bounds how far back a new
// model goes.
//
// A stop (the context of [Worker.Run] done, SIGTERM in the CLI) comes
// between studies: the study in hand finishes within Config.Drain, and is
// otherwise abandoned with nothing stored.
//
// # Failures
//
// An unreachable PACS or HL7 receiver (connection errors, 5xx answers,
// after the client's own retries) stops the round; the worker waits with
// exponential backoff and tries again, forever: an outage is ridden out,
// and no study is dead-lettered for it. Any other failure of a study — a
// header or image that does not decode (a film claiming 65535² pixels, a
// length that runs past the data), no frontal view, more than the bounds
// allow, a 4xx answer about it — sends it to the dead-letter list
// ([Worker.DeadLetters], and DeadLetterFile when set) with its error, and
// the others go on.
//
// # Progress
//
// Each study reported, found reported or dead-lettered is logged through
// the optional *slog.Logger; [Worker.Stats] counts them, and
// [Worker.WriteMetrics] writes the counts for Prometheus.
package pacs
