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
// Connection errors and 5xx answers are retried with exponential backoff
// ([Retry], honouring a Retry-After header); when the attempts run out the
// error wraps [ErrUnavailable], so a caller can ride out an outage at its
// own pace. Any other answer that is not a success is a [*StatusError]
// naming the method, the URL (without credentials) and the status, with
// the start of the server's message. STOW-RS is retried as the reads are:
// storing an instance whose SOP Instance UID the server already holds does
// not add a second one.
//
// # Bounds
//
// Nothing a server sends is read without a limit ([Limits]): JSON answers
// by size, search results by count, multipart answers by their parts'
// count and sizes, each checked while reading, before the bytes are kept.
// A server that sends more gets an error wrapping [ErrLimit]; a body that
// is not what its Content-Type says gets [ErrMalformed].
//
// # Formats
//
// Search and metadata answers are the DICOM JSON Model (PS3.18 F.2), read
// into [Dataset]s keyed by tag; instances travel as multipart/related
// bodies of application/dicom parts ([ReadMultipart], [WriteMultipart]).
// WADO-RS asks for the transfer syntax the server stored ("*"), so nothing
// is transcoded on the way.
package dicomweb
