// Package dicomweb is a DICOMweb client (DICOM PS3.18) in pure Go: QIDO-RS
// search for studies, series and instances, WADO-RS retrieval of
// instances and their metadata, and STOW-RS store, the three services a
// PACS such as Orthanc, dcm4chee or a cloud healthcare API answers over
// HTTP.
//
// A [Client] is made once for a server's DICOMweb root (for Orthanc
// "http://host:8042/dicom-web") with the authentication the server asks
// for ([WithBasicAuth] or [WithBearerToken]) and is safe for concurrent
// use. Every call takes a context.
//
// # Failures
//
// Connection errors, attempts past a deadline ([Timeouts]) and 408, 429
// and 5xx answers are retried with exponential backoff ([Retry]),
// honouring a Retry-After header (delta-seconds or an HTTP-date, at most
// [MaxRetryAfter]; one longer than Retry.Max ends the retries at once and
// is left in [StatusError].RetryAfter for the caller to wait); when the
// attempts run out the error wraps [ErrUnavailable], so a caller can ride
// out an outage at its own pace. An answer broken off after it started (a
// dropped connection, a body past its deadline, a multipart body without
// its closing delimiter) wraps ErrUnavailable and [ErrTruncated] too. Any
// other answer that is not a success is a [*StatusError] naming the
// method, the URL (without credentials) and the status, with the start of
// the server's message; a complete answer that is not what it should be is
// [ErrMalformed].
//
// STOW-RS is retried as the reads are: storing an instance whose SOP
// Instance UID the server already holds does not add a second one. A
// store succeeds only when the answer lists each instance sent, by its
// SOP Instance UID, in its Referenced SOP Sequence and none in its Failed
// SOP Sequence; otherwise [Client.Store] returns a [*StoreError], which
// says whether storing again may help.
//
// # Deadlines
//
// Each attempt is bounded in time whatever HTTP client carries it
// ([Timeouts], [WithTimeouts]): 30 s from the request's start to the
// answer's headers, 10 min for the answer's body, and a body that brings
// less than [StallBytes] (1 KiB) in any 30 s is cut off then; an answer
// still coming after 10 s is logged, and again every 10 s, with the bytes
// so far. An attempt cut off is an outage (ErrUnavailable).
//
// # Redirects
//
// A redirect is followed only within the root's origin (same scheme, host
// and port), at most 5 in a row, each logged. A redirect to another
// origin — http from https, another host, another port — is not followed:
// the credentials and the request's body stay where they were sent, and
// the request fails with [ErrRedirect], never retried. The policy is set
// on the client's own copy of any HTTP client given ([WithHTTPClient]).
//
// # Bounds
//
// Nothing a server sends is read without a limit ([Limits]): JSON answers
// by size, search results by count, multipart answers by their parts'
// count and sizes, each checked while reading, before the bytes are kept.
// A server that sends more gets an error wrapping [ErrLimit]; a body that
// is not what its Content-Type says, or a search answered with an HTML
// page, gets [ErrMalformed].
//
// # Formats
//
// Search and metadata answers are the DICOM JSON Model (PS3.18 F.2), read
// into [Dataset]s keyed by tag; instances travel as multipart/related
// bodies of application/dicom parts ([ReadMultipart], [WriteMultipart]).
// WADO-RS asks for the transfer syntax the server stored ("*"), so nothing
// is transcoded on the way.
package dicomweb
