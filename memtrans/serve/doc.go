// Package serve is an HTTP service over a loaded memtrans.Model: an
// http.Handler to mount in an existing server, with the limits, back-pressure,
// health checks and metrics a service needs, and a web page on which a
// person drops a study's files, reads the report and sees where the model
// looked for each word.
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
//	GET  /v1/model     architecture, configuration, vocabulary size, checksum
//	GET  /healthz      200 while the process serves
//	GET  /readyz       200 when a report can be taken now: WarmUp has
//	                   succeeded, the handler is not closed or draining, and
//	                   the queue and the memory budget have room; else 503
//	GET  /metrics      Prometheus text format: requests by route and outcome,
//	                   report latency histogram, studies per Generate call,
//	                   in-flight studies, queue length, readiness
//	GET  /             the web page (embedded; it loads nothing from elsewhere)
//
// The FHIR DiagnosticReport (package memtrans/fhir) names the study by the
// study_uid field, or by the StudyInstanceUID, accession number and patient
// of the first DICOM view's header, or else by a fresh UID under 2.25.
//
// Errors are JSON, {"error": {"code": "...", "message": "..."}}, with the
// stable codes of the Code constants and messages that name what to change,
// never the server's internals.
//
// # Limits and back-pressure
//
// Every limit is an option: upload bytes (WithMaxUploadBytes; a declared
// Content-Length over it is refused before the body is read), the time an
// upload may take (WithUploadTimeout, its own read deadline), pixels per
// view, checked against the image header before decoding (WithMaxPixels),
// files per upload (WithMaxViews), the time from arrival to answer, whose
// deadline reaches the decoding of the views and Model.Generate
// (WithTimeout), the requests admitted at once (WithQueue) and the memory
// requests hold at once (WithMemoryBudget). A request is admitted only once
// its upload has arrived, been validated and decoded, so a stalled client
// costs a connection, not a place in the queue. Every request reserves in
// the memory budget what it is about to allocate: its upload as it arrives,
// each view's decoding buffers (from the header's pixel count) and its
// generation's work; a reservation waits at most half the request's
// remaining time. A request beyond the queue or the budget is answered
// with 429 and a Retry-After header; none waits without bound. When idle
// after serving, the handler returns freed memory to the operating system.
// WithBearerToken requires a bearer token on the API and /metrics (the
// scheme's name is case-insensitive).
//
// # Batching
//
// WithConcurrency workers call Model.Generate. Each takes the studies
// waiting in the queue with the same generation options, up to
// WithBatching's maxBatch, and waits at most its wait for requests that are
// still uploading, so concurrent requests share one batched decoding; a lone
// request does not wait. A batch's context ends when all of its requests'
// contexts have; each request still answers 504 at its own deadline.
// WithoutBatching gives every request its own Generate call with its own
// context.
//
// # Running
//
// A Handler does not own its model. Register Drain with the server
// (srv.RegisterOnShutdown(h.Drain)) so that Shutdown cuts the uploads still
// arriving at once and waits only for the requests being decoded or
// generated; then Close the handler, then the model. The command
// examples/server does exactly this.
package serve
