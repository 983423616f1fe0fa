package dicomweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Query is a QIDO-RS search (PS3.18 10.6). Empty fields match anything.
type Query struct {
	// Modalities matches studies holding any of these modalities
	// (ModalitiesInStudy) in a study search, the series' Modality in a
	// series search.
	Modalities []string
	// StudyDate matches a date range; a zero end leaves that end open.
	From, To time.Time
	// Exact matches on identifiers.
	StudyInstanceUID, PatientID, AccessionNumber string
	// Fields asks for attributes beyond the defaults (includefield), as
	// tags or keywords.
	Fields []string
	// Limit and Offset page the answer; Limit 0 leaves it to the server.
	Limit, Offset int
	// Extra holds other matching keys (keyword or tag → value).
	Extra url.Values
}

// values encodes q; study says whether Modalities is ModalitiesInStudy.
func (q Query) values(study bool) (url.Values, error) {
	v := url.Values{}
	for k, vals := range q.Extra {
		v[k] = append([]string(nil), vals...)
	}
	if len(q.Modalities) > 0 {
		for _, m := range q.Modalities {
			if m == "" || strings.ContainsAny(m, `,\*?`) {
				return nil, fmt.Errorf("%w: modality %q", ErrInput, m)
			}
		}
		key := "Modality"
		if study {
			key = "ModalitiesInStudy"
		}
		v.Set(key, strings.Join(q.Modalities, ",")) // a list of values, PS3.18 8.3.4.1
	}
	if !q.From.IsZero() || !q.To.IsZero() {
		r := "-"
		if !q.From.IsZero() {
			r = q.From.Format("20060102") + r
		}
		if !q.To.IsZero() {
			r += q.To.Format("20060102")
		}
		v.Set("StudyDate", r)
	}
	for k, s := range map[string]string{"StudyInstanceUID": q.StudyInstanceUID, "PatientID": q.PatientID, "AccessionNumber": q.AccessionNumber} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for _, f := range q.Fields {
		v.Add("includefield", f)
	}
	if q.Limit < 0 || q.Offset < 0 {
		return nil, fmt.Errorf("%w: limit %d, offset %d", ErrInput, q.Limit, q.Offset)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	return v, nil
}

// SearchStudies searches for studies (GET {root}/studies).
func (c *Client) SearchStudies(ctx context.Context, q Query) ([]Dataset, error) {
	v, err := q.values(true)
	if err != nil {
		return nil, err
	}
	return c.getJSON(ctx, c.endpoint(v, "studies"))
}

// SearchSeries searches for the series of a study (GET
// {root}/studies/{study}/series), or of every study when studyUID is "".
func (c *Client) SearchSeries(ctx context.Context, studyUID string, q Query) ([]Dataset, error) {
	v, err := q.values(false)
	if err != nil {
		return nil, err
	}
	if studyUID == "" {
		return c.getJSON(ctx, c.endpoint(v, "series"))
	}
	if err := checkUIDs(studyUID); err != nil {
		return nil, err
	}
	return c.getJSON(ctx, c.endpoint(v, "studies", studyUID, "series"))
}

// SearchInstances searches for the instances of a series (GET
// {root}/studies/{study}/series/{series}/instances), of a study when
// seriesUID is "", or of every study when both are "".
func (c *Client) SearchInstances(ctx context.Context, studyUID, seriesUID string, q Query) ([]Dataset, error) {
	v, err := q.values(false)
	if err != nil {
		return nil, err
	}
	switch {
	case studyUID == "" && seriesUID == "":
		return c.getJSON(ctx, c.endpoint(v, "instances"))
	case seriesUID == "":
		if err := checkUIDs(studyUID); err != nil {
			return nil, err
		}
		return c.getJSON(ctx, c.endpoint(v, "studies", studyUID, "instances"))
	}
	if err := checkUIDs(studyUID, seriesUID); err != nil {
		return nil, err
	}
	return c.getJSON(ctx, c.endpoint(v, "studies", studyUID, "series", seriesUID, "instances"))
}

// Metadata retrieves the metadata of a study, a series or an instance
// (WADO-RS, GET …/metadata): the instances' attributes without their bulk
// data. seriesUID and instanceUID narrow it when given.
func (c *Client) Metadata(ctx context.Context, studyUID, seriesUID, instanceUID string) ([]Dataset, error) {
	segs, err := resource(studyUID, seriesUID, instanceUID)
	if err != nil {
		return nil, err
	}
	return c.getJSON(ctx, c.endpoint(nil, append(segs, "metadata")...))
}

// getJSON GETs a DICOM JSON answer.
func (c *Client) getJSON(ctx context.Context, u string) ([]Dataset, error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, url: u, header: http.Header{"Accept": {"application/dicom+json"}}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil, nil
	}
	if ct := resp.Header.Get("Content-Type"); notJSON(ct) {
		return nil, fmt.Errorf("dicomweb: GET %s: %w: an answer of type %q, not DICOM JSON", u, ErrMalformed, truncate(ct, 64))
	}
	b, err := readLimited(resp.Body, c.limits.JSONBytes, "answer")
	if err != nil {
		return nil, fmt.Errorf("dicomweb: GET %s: %w", u, wrapRead(err))
	}
	ds, err := ParseJSON(b, c.limits.Results)
	if err != nil {
		return nil, fmt.Errorf("dicomweb: GET %s: %w", u, err)
	}
	return ds, nil
}

// notJSON reports whether a Content-Type is one no JSON answer has (a
// login page, an error page of a proxy); a missing or unusual one is
// left to the parser.
func notJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "text/html" || mt == "application/xhtml+xml" || strings.HasSuffix(mt, "/xml") ||
		strings.HasPrefix(mt, "multipart/") || strings.HasPrefix(mt, "image/") || mt == "application/dicom")
}

// wrapRead marks an error that broke off a body as an outage (the
// connection went, a deadline passed), leaving the client's own limit
// errors as they are.
func wrapRead(err error) error {
	if errors.Is(err, ErrTruncated) || !isOurs(err) {
		return fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
	}
	return err
}

func isOurs(err error) bool {
	for _, e := range []error{ErrLimit, ErrMalformed, ErrInput, ErrUnavailable, ErrTruncated} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Retrieve retrieves the instances of a study, a series or one instance
// (WADO-RS, GET {root}/studies/{study}[/series/{series}[/instances/{sop}]])
// as stored (transfer-syntax=*), and calls fn with each, in the order the
// server sends them. The request is retried until the answer starts;
// once it has started, an answer broken off (the connection dropped, the
// body's deadline passed, the body ending before its closing delimiter)
// is returned wrapped with ErrUnavailable (and ErrTruncated), not
// retried: the caller may try again later. Parts are bounded by the
// client's Limits (ErrLimit); a complete answer that is not a multipart
// of DICOM instances is ErrMalformed. fn's time counts against the
// client's Timeouts: one that holds the body unread for Timeouts.Stall
// has the answer cut off (copy the part out first when its work is long).
func (c *Client) Retrieve(ctx context.Context, studyUID, seriesUID, instanceUID string, fn func(Part) error) error {
	segs, err := resource(studyUID, seriesUID, instanceUID)
	if err != nil {
		return err
	}
	u := c.endpoint(nil, segs...)
	resp, err := c.do(ctx, request{method: http.MethodGet, url: u,
		header: http.Header{"Accept": {`multipart/related; type="application/dicom"; transfer-syntax=*`}}})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lim := PartLimits{Parts: c.limits.Parts, PartBytes: c.limits.InstanceBytes, TotalBytes: c.limits.TotalBytes}
	var fnErr error
	err = ReadMultipart(resp.Header.Get("Content-Type"), resp.Body, lim, func(p Part) error {
		if mt, _, _ := mime.ParseMediaType(p.ContentType); mt != "" && mt != "application/dicom" {
			return fmt.Errorf("%w: a part of type %q", ErrMalformed, truncate(p.ContentType, 64))
		}
		fnErr = fn(p)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("dicomweb: GET %s: %w", u, ctx.Err())
	case fnErr != nil && err == fnErr && !errors.Is(err, ErrTruncated):
		return fmt.Errorf("dicomweb: GET %s: %w", u, err) // the caller's own error, as it is
	}
	return fmt.Errorf("dicomweb: GET %s: %w", u, wrapRead(err))
}

// resource checks UIDs and returns the path segments of a study, series
// or instance.
func resource(study, series, instance string) ([]string, error) {
	segs := []string{"studies", study}
	ids := []string{study}
	if series != "" {
		segs, ids = append(segs, "series", series), append(ids, series)
	}
	if instance != "" {
		if series == "" {
			return nil, fmt.Errorf("%w: an instance UID without its series", ErrInput)
		}
		segs, ids = append(segs, "instances", instance), append(ids, instance)
	}
	return segs, checkUIDs(ids...)
}

// checkUIDs accepts dotted-decimal UIDs of at most 64 characters.
func checkUIDs(uids ...string) error {
	for _, u := range uids {
		ok := u != "" && len(u) <= 64 && u[0] != '.' && u[len(u)-1] != '.' && !strings.Contains(u, "..")
		for _, r := range u {
			ok = ok && (r == '.' || r >= '0' && r <= '9')
		}
		if !ok {
			return fmt.Errorf("%w: %q is not a DICOM UID", ErrInput, truncate(u, 80))
		}
	}
	return nil
}

// SOPRef names a stored or failed instance in a STOW-RS answer.
type SOPRef struct {
	ClassUID, InstanceUID string
	Reason                int    // Failure Reason (0008,1197) or Warning Reason (0008,1196); 0 if none
	RetrieveURL           string // where the server keeps it, when it says
}

// StoreResult is the answer to a STOW-RS request.
type StoreResult struct {
	Stored []SOPRef // Referenced SOP Sequence: kept, possibly with a warning reason
	Failed []SOPRef // Failed SOP Sequence, with the failure reason
}

// StoreError is a STOW-RS answer of success (200 or 202) that does not
// list every instance sent in its Referenced SOP Sequence, or lists one
// in its Failed SOP Sequence. It wraps ErrNotStored.
type StoreError struct {
	URL     string   // without credentials
	Status  int      // the answer's status
	Missing []string // SOP Instance UIDs sent and in neither sequence
	Failed  []SOPRef // instances sent and failed, with their reason
}

// Error names the request and the first instance not stored.
func (e *StoreError) Error() string {
	s := fmt.Sprintf("dicomweb: POST %s: %d: ", e.URL, e.Status)
	if len(e.Failed) > 0 {
		f := e.Failed[0]
		s += fmt.Sprintf("%d instances failed, first %s (reason 0x%04X)", len(e.Failed), truncate(f.InstanceUID, 64), f.Reason)
		if len(e.Missing) > 0 {
			s += ", and "
		}
	}
	if len(e.Missing) > 0 {
		s += fmt.Sprintf("%d instances not in the answer's Referenced SOP Sequence, first %s", len(e.Missing), truncate(e.Missing[0], 64))
	}
	return s
}

// Unwrap returns ErrNotStored.
func (e *StoreError) Unwrap() error { return ErrNotStored }

// Temporary reports whether storing again may succeed: an instance the
// answer does not name may or may not be stored (a server answering
// success without saying what it kept), and a failure for want of
// resources (0xA7xx) or in processing (0x0110) may pass; the other
// reasons (0xA9xx the data set does not match its SOP class, 0xCxxx it
// cannot be understood, 0x0122 the SOP class is not supported …) are
// final.
func (e *StoreError) Temporary() bool {
	for _, f := range e.Failed {
		if f.Reason&0xFF00 != 0xA700 && f.Reason != 0x0110 {
			return false
		}
	}
	return true
}

// Store stores DICOM Part 10 instances (STOW-RS, POST {root}/studies, or
// {root}/studies/{study} when studyUID is given: then the server refuses
// instances of other studies). It succeeds when the answer (200 or 202)
// lists every instance — by the Media Storage SOP Instance UID of its
// file meta information — in its Referenced SOP Sequence and none in its
// Failed SOP Sequence; otherwise the error is a [*StoreError] (wrapping
// ErrNotStored) and the result says what the server answered. 409 (no
// instance stored) and the other 4xx are a *StatusError. The request is
// retried on connection errors, deadlines passed, 408, 429 and 5xx: an
// instance the server already holds is kept once.
func (c *Client) Store(ctx context.Context, studyUID string, instances ...[]byte) (*StoreResult, error) {
	if len(instances) == 0 {
		return nil, fmt.Errorf("%w: nothing to store", ErrInput)
	}
	segs := []string{"studies"}
	if studyUID != "" {
		if err := checkUIDs(studyUID); err != nil {
			return nil, err
		}
		segs = append(segs, studyUID)
	}
	sops := make([]string, len(instances))
	for i, b := range instances {
		uid, ok := sopInstanceUID(b)
		if !ok {
			return nil, fmt.Errorf("%w: instance %d is not a DICOM Part 10 file naming its SOP Instance UID (0002,0003)", ErrInput, i)
		}
		sops[i] = uid
	}
	var body bytes.Buffer
	var ctype string
	for range 4 {
		body.Reset()
		var err error
		if ctype, err = WriteMultipart(&body, NewBoundary(), "application/dicom", instances...); err == nil {
			break
		}
	}
	if ctype == "" {
		return nil, fmt.Errorf("%w: no boundary found for the instances", ErrInput)
	}
	u := c.endpoint(nil, segs...)
	req := request{method: http.MethodPost, url: u, body: body.Bytes(),
		header: http.Header{"Content-Type": {ctype}, "Accept": {"application/dicom+json"}}}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err // 409 (every instance failed) among them, as a *StatusError
	}
	defer resp.Body.Close()
	b, err := readLimited(resp.Body, c.limits.JSONBytes, "STOW-RS answer")
	if err != nil {
		return nil, fmt.Errorf("dicomweb: POST %s: %w", u, wrapRead(err))
	}
	ds, err := ParseJSON(b, 1)
	if err != nil {
		return nil, fmt.Errorf("dicomweb: POST %s: %w", u, err)
	}
	res := &StoreResult{}
	if len(ds) == 1 {
		for _, s := range []struct {
			tag, reason uint32
			out         *[]SOPRef
		}{{TagReferencedSOPSequence, TagWarningReason, &res.Stored}, {TagFailedSOPSequence, TagFailureReason, &res.Failed}} {
			items, err := ds[0].Items(s.tag)
			if err != nil {
				return nil, fmt.Errorf("dicomweb: POST %s: %w", u, err)
			}
			for _, it := range items {
				r, _ := it.Int(s.reason)
				*s.out = append(*s.out, SOPRef{ClassUID: it.String(TagReferencedSOPClassUID), InstanceUID: it.String(TagReferencedSOPInstanceUID),
					Reason: r, RetrieveURL: it.String(TagRetrieveURL)})
			}
		}
	}
	serr := &StoreError{URL: u, Status: resp.StatusCode}
	for _, sop := range sops {
		same := func(r SOPRef) bool { return r.InstanceUID == sop }
		if i := slices.IndexFunc(res.Failed, same); i >= 0 {
			serr.Failed = append(serr.Failed, res.Failed[i])
		} else if !slices.ContainsFunc(res.Stored, same) {
			serr.Missing = append(serr.Missing, sop)
		}
	}
	if len(serr.Failed) > 0 || len(serr.Missing) > 0 {
		return res, serr
	}
	return res, nil
}
