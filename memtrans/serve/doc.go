// Package serve is an HTTP service over a loaded memtrans.Model: [New]
// returns a [Handler], an http.Handler to mount in an existing server, with
// the limits, back-pressure, health checks and metrics a service needs, and
// a web page on which a person drops a study's files, reads the report and
// sees where the model looked for each word. Options ([Option]) set its
// limits. It answers the requests that reach it and does not poll a PACS:
// the worker that polls an archive is memtrans/pacs. The radgen serve
// command (memtrans/cli) runs this handler in a server of its own.
//
// # Routes
//
//	POST /v1/reports   one study as multipart/form-data: one file per view
//	                   (PNG, JPEG or DICOM, in the model's view order) and
//	                   optional fields (or query parameters) study_id,
//	                   study_uid, beam_size, max_length, attention, images,
//	                   fhir.
//	                   Answers the report as JSON: text, words, tokens, token
//	                   log-probabilities, log_prob, truncated (cut at
//	                   max_length), the study's identity from a DICOM view's
//	                   header, the model's name and
//	                   checksum, timings, and on request the attention of
//	                   every word over every view, the decoded views as PNG
//	                   and a FHIR DiagnosticReport.
//	POST /dicomweb/studies[/{study}]
//	                   a study pushed by STOW-RS (DICOM PS3.18 10.5):
//	                   multipart/related; type="application/dicom", one
//	                   instance a part; optional query parameters beam_size
//	                   and max_length. Answers a Store Instances Response
//	                   carrying the DICOM SR and the FHIR report (see
//	                   STOW-RS below).
//	GET  /v1/model     architecture, configuration, vocabulary size, checksum,
//	                   and radgen_version, the version of radgen serving it
//	                   (radgen.Version)
//	GET  /healthz      200 while the process serves
//	GET  /readyz       200 when a report can be taken now: WarmUp has
//	                   succeeded, the handler is not closed or draining, and
//	                   the queue and the memory budget have room; else 503
//	GET  /metrics      Prometheus text format: requests by route and outcome
//	                   (route /dicomweb/studies or /dicomweb/studies/{study}
//	                   for STOW-RS, whose 202 counts as "partial"),
//	                   report latency histogram, studies per Generate call,
//	                   in-flight studies, queue length, readiness, and
//	                   with WithPACS the SRs stored into the PACS by
//	                   outcome
//	GET  /             the web page (embedded; it loads nothing from elsewhere)
//
// The FHIR DiagnosticReport (package memtrans/fhir) names the study by the
// study_uid field, or by the StudyInstanceUID, accession number and patient
// of the first DICOM view's header, or else by a fresh UID under 2.25.
//
// # STOW-RS
//
// A PACS or a router pushes a study as it pushes one to an archive; the
// request takes the path of POST /v1/reports (the same limits, admission
// after the body, memory budget, deadlines and checks before any
// generation). A request is one study: the study of its path, or else the
// study of its first image. Each part must be application/dicom and a
// DICOM instance whose header reads (else its Failure Reason is 0xC000,
// cannot understand) of that study (else 0xC409, a code of this
// service's own: another study); instances that are not images
// (presentation states, SRs) are taken and not used. The views are chosen
// among the study's images as memtrans.StudiesFromDICOMDir chooses them:
// the frontal view (PA before AP), then for a two-view model the lateral
// (LL before RL), then by Series and Instance Number and by place in the
// request. No frontal or lateral view is 422 view_count; no instance taken
// is 409 instances_refused, answered with the Store Instances Response
// naming each failure.
//
// The answer is the report about the study. By default (Accept
// application/dicom+json, application/json, */* or none) it is a Store
// Instances Response (PS3.18 Annex I), 200 when every instance was taken
// and 202 when some failed: Referenced SOP Sequence (0008,1199) lists the
// instances taken, Failed SOP Sequence (0008,1198) the others with their
// Failure Reason (0008,1197), Retrieve URL (0008,1190) the study in the
// PACS when [WithPACS] stored the SR there; and the private block of creator
// [PrivateCreator] (0009,0010) holds the report: the DICOM SR as a Part 10
// file ([TagReportSR], OB as InlineBinary), the FHIR DiagnosticReport
// ([TagReportFHIR], its JSON as UT), the text ([TagReportText]) and, when
// stored, the SR's WADO-RS URL ([TagReportSRURL]). Accept
// multipart/related; type="application/dicom" answers the SR alone, as a
// WADO-RS answer carries an instance; Accept application/fhir+json the
// FHIR report alone (same status; the failures are then not told). The SR
// is the one the PACS worker (memtrans/pacs) writes: a new series of the
// study, its series and instance UIDs derived from the study and the model
// (dicomsr.StudyUIDs with the model's name and checksum), so a push
// retried stores the same instance again, which a PACS keeps once. With
// WithPACS it is stored into the study by STOW-RS before the answer. The
// PACS has taken it only when its Store Instances Response lists the SR's
// SOP Instance UID in the Referenced SOP Sequence and not in the Failed
// SOP Sequence; any other answer (an error status, a 200 or 202 with an
// empty body or without the SR, the SR failed) makes the answer 502
// pacs_error, without Retrieve URLs, and is logged and counted in
// radgen_pacs_stores_total by outcome.
//
// Errors are JSON, {"error": {"code": "...", "message": "..."}}, with the
// stable codes of the Code constants ([CodeBadRequest] …) and messages that name what to change,
// never the server's internals.
//
// # Limits and back-pressure
//
// Every limit is an option: upload bytes ([WithMaxUploadBytes]; a declared
// Content-Length over it is refused before the body is read), the time an
// upload may take ([WithUploadTimeout], its own read deadline), pixels per
// view, checked against the image header before decoding ([WithMaxPixels]),
// files per upload ([WithMaxViews]), the time from arrival to answer, whose
// deadline reaches the decoding of the views and Model.Generate
// ([WithTimeout]), the requests admitted at once ([WithQueue]) and the memory
// requests hold at once ([WithMemoryBudget]). A request is admitted only once
// its upload has arrived, been validated and decoded, so a stalled client
// costs a connection and the memory its upload reserved, not a place in
// the queue.
//
// Every request reserves in the memory budget what it is about to
// allocate. Its upload is reserved in one step before a byte of the body
// is read: the declared Content-Length, or for a body of undeclared length
// the upload limit, at most a quarter of the budget (such a body past that
// reserves the rest as it arrives). An upload that does not fit is
// answered 429 at once, its body unread, and one declared larger than the
// whole budget 413. Then each view's decoding buffers (from the header's
// pixel count) and the generation's work are reserved as the request gets
// to them, while it holds its upload or its views. Those waits are served
// oldest request first; when the oldest's could not be served even once
// every request not waiting had given back what it holds, the youngest
// waiting request gives way and is answered 429, so that requests never
// hold the budget among themselves; and a wait lasts at most half the
// request's remaining time. A request beyond the queue or the budget is
// answered with 429 and a Retry-After header; none waits without bound.
// When idle for ten seconds after serving, the handler returns freed memory
// to the operating system.
//
// [WithBearerToken] requires a bearer token on the API and /metrics (the
// scheme's name is case-insensitive).
//
// # Batching
//
// [WithConcurrency] workers call Model.Generate. Each takes the studies
// waiting in the queue with the same generation options, up to
// [WithBatching]'s maxBatch, and waits at most its wait for requests that are
// still uploading, so concurrent requests share one batched decoding; a lone
// request does not wait. A batch's context ends when all of its requests'
// contexts have; each request still answers 504 at its own deadline.
// [WithoutBatching] gives every request its own Generate call with its own
// context.
//
// # Running
//
// A [Handler] does not own its model. Register [Handler.Drain] with the
// server (srv.RegisterOnShutdown(h.Drain)) so that Shutdown cuts the uploads
// still arriving at once and waits only for the requests being decoded or
// generated; then [Handler.Close] the handler, then the model. memtrans/cli's
// ServerMain (radgen serve, examples/server) does exactly this.
package serve
