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
//	                   log-probabilities, log_prob, the model's name and
//	                   checksum, timings, and on request the attention of
//	                   every word over every view, the decoded views as PNG
//	                   and a FHIR DiagnosticReport.
//	GET  /v1/model     architecture, configuration, vocabulary size, checksum
//	GET  /healthz      200 while the process serves
//	GET  /readyz       200 once WarmUp has succeeded, 503 before
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
// Every limit is an option: upload bytes (WithMaxUploadBytes), pixels per
// view, checked against the image header before decoding (WithMaxPixels),
// files per upload (WithMaxViews), the time from admission to answer, whose
// deadline reaches Model.Generate through the request's context
// (WithTimeout), and the requests admitted at once (WithQueue). A request
// beyond the queue is answered at once with 429 and a Retry-After header;
// none waits without bound. WithBearerToken requires a bearer token on the
// API and /metrics.
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
// A Handler does not own its model: stop the http.Server first
// (Shutdown lets requests in flight finish), then Close the handler, then
// the model. The command examples/server does exactly this.
package serve
