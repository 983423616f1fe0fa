package dicomweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
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

// wrapRead marks an error that broke off a body as an outage (the
// connection went), leaving the client's own limit errors as they are.
func wrapRead(err error) error {
	if isOurs(err) {
		return err
	}
	return fmt.Errorf("%w: reading the answer: %w", ErrUnavailable, err)
}

func isOurs(err error) bool {
	for _, e := range []error{ErrLimit, ErrMalformed, ErrInput, ErrUnavailable} {
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
// once fn has seen a part, a broken connection is returned (wrapped with
// ErrUnavailable), not retried. Parts are bounded by the client's Limits.
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
	err = ReadMultipart(resp.Header.Get("Content-Type"), resp.Body, lim, func(p Part) error {
		if mt, _, _ := mime.ParseMediaType(p.ContentType); mt != "" && mt != "application/dicom" {
			return fmt.Errorf("%w: a part of type %q", ErrMalformed, truncate(p.ContentType, 64))
		}
		return fn(p)
	})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("dicomweb: GET %s: %w", u, ctx.Err())
		}
		return fmt.Errorf("dicomweb: GET %s: %w", u, wrapRead(err))
	}
	return nil
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

// Store stores DICOM Part 10 instances (STOW-RS, POST {root}/studies, or
// {root}/studies/{study} when studyUID is given: then the server refuses
// instances of other studies). It returns an error when any instance
// failed, with the result listing which. The request is retried on
// connection errors and 5xx: an instance the server already holds is
// kept once.
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
	if len(res.Failed) > 0 {
		f := res.Failed[0]
		return res, fmt.Errorf("dicomweb: POST %s: %d of %d instances failed, first %s (reason 0x%04X)", u, len(res.Failed), len(instances), f.InstanceUID, f.Reason)
	}
	return res, nil
}
