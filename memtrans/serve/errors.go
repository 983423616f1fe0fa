package serve

import (
	"encoding/json"
	"net/http"
)

// Error codes: the "code" of every error answer. They are stable; the
// messages are for people and may change.
const (
	CodeUnauthorized     = "unauthorized"       // 401: missing or wrong bearer token
	CodeNotFound         = "not_found"          // 404: no such route
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeBadRequest       = "bad_request"        // 400: malformed multipart body
	CodeInvalidOption    = "invalid_option"     // 400: a generation option out of range
	CodeNoViews          = "no_views"           // 400: an upload without image files
	CodeUnsupportedMedia = "unsupported_media"  // 415: not multipart (or, for STOW-RS, not multipart/related of application/dicom), or a file that is not PNG, JPEG or DICOM
	CodeUploadTooLarge   = "upload_too_large"   // 413: body beyond WithMaxUploadBytes or, declared, beyond WithMemoryBudget (refused before reading when Content-Length says so)
	CodeUploadTimeout    = "upload_timeout"     // 408: the body did not arrive within WithUploadTimeout
	CodeTooManyViews     = "too_many_views"     // 413: files beyond WithMaxViews (STOW-RS: instances beyond WithMaxInstances)
	CodeTooManyPixels    = "too_many_pixels"    // 413: a view beyond WithMaxPixels
	CodeBadImage         = "bad_image"          // 422: a PNG, JPEG or DICOM file that does not decode
	CodeViewCount        = "view_count"         // 422: not as many views as the model takes (STOW-RS: no frontal or lateral view among the study's images)
	CodeEmptyReport      = "empty_report"       // 422: the model wrote no text for the study, so no FHIR report or SR can carry it
	CodeInstancesRefused = "instances_refused"  // 409: STOW-RS: none of the instances could be taken; the answer is a Store Instances Response naming each with its Failure Reason
	CodePACS             = "pacs_error"         // 502: the PACS (WithPACS) did not take the SR
	CodeOverloaded       = "overloaded"         // 429: the queue or the memory budget is full; see Retry-After
	CodeTimeout          = "timeout"            // 504: the request ran past WithTimeout
	CodeCanceled         = "canceled"           // 499: the client went away
	CodeUnavailable      = "unavailable"        // 503: the handler is closed or draining, or not ready (/readyz)
	CodeInternal         = "internal"           // 500
)

// statusCanceled is the status logged and counted for a request whose client
// went away (nginx's convention); nobody reads the answer.
const statusCanceled = 499

// apiError is an error answer: a status, a stable code and a message that
// tells the client what to change, never the server's internals.
type apiError struct {
	status  int
	code    string
	message string
	// body, when set, is the answer instead of the JSON error, of type
	// ctype (a STOW-RS Store Instances Response).
	body  []byte
	ctype string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func errorf(status int, code, message string) *apiError {
	return &apiError{status: status, code: code, message: message}
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.body != nil {
		writeBody(w, e.status, e.ctype, e.body)
		return
	}
	var b errorBody
	b.Error.Code, b.Error.Message = e.code, e.message
	writeJSON(w, e.status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the status is sent; a failed write means the client left
}

// writeBody answers with a body already encoded.
func writeBody(w http.ResponseWriter, status int, ctype string, body []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the status is sent; a failed write means the client left
}
