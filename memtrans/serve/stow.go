package serve

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/radgen/radgen/internal/dicomviews"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/fhir"
	"github.com/radgen/radgen/vision"
)

// stowRoot is the path of the STOW-RS route; a study's UID may follow it.
const stowRoot = "/dicomweb/studies"

// The private block of the STOW-RS answer (application/dicom+json): the
// report itself, beside the Store Instances Response's standard
// attributes. Its creator is PrivateCreator at (0009,0010), so its
// elements are (0009,10xx).
const (
	PrivateCreator           = "RADGEN 1"
	TagPrivateCreator uint32 = 0x00090010
	TagReportSR       uint32 = 0x00091001 // OB, as InlineBinary: the DICOM SR, a Part 10 file
	TagReportFHIR     uint32 = 0x00091002 // UT: the FHIR DiagnosticReport, as JSON text
	TagReportText     uint32 = 0x00091003 // UT: the report's text
	TagReportSRURL    uint32 = 0x00091004 // UR: the SR's WADO-RS URL in the PACS, when WithPACS stored it
)

// Failure Reasons (0008,1197) of the instances a STOW-RS request gives
// that the service does not take (PS3.18 I.2.2).
const (
	failureCannotUnderstand uint16 = 0xC000 // not application/dicom, not DICOM, or a header that does not read
	failureOtherStudy       uint16 = 0xC409 // of another study than the request's (this service's own Cxxx code)
)

// instance is one part of a STOW-RS request.
type instance struct {
	n      int               // its place in the request, from 1
	b      *blob             // its bytes: kept for the request study's images only
	info   *vision.DICOMInfo // its header, when it reads
	reason uint16            // Failure Reason; 0 when taken
	why    string            // the failure, for the log
}

// name is how messages name the instance: its place in the request,
// zero-padded so that names sort as places do (the views' last tie-break).
func (in *instance) name() string { return fmt.Sprintf("part-%04d", in.n) }

func (in *instance) fail(reason uint16, why string) {
	in.reason, in.why = reason, why
}

// stowStudy is what a STOW-RS request gave: its instances and the study
// built from them.
type stowStudy struct {
	uid       string
	instances []*instance
	src       *vision.DICOMStudy // the views chosen, and the other images
}

// stowMedia checks a STOW-RS request's Content-Type: multipart/related
// with a boundary, whose type (when given) is application/dicom.
func stowMedia(ct string) *apiError {
	const want = `send the study as multipart/related; type="application/dicom" (DICOM PS3.18 STOW-RS), one DICOM instance a part`
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "multipart/related" || params["boundary"] == "" {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, want)
	}
	if t := params["type"]; t != "" && !strings.EqualFold(t, "application/dicom") {
		return errorf(http.StatusUnsupportedMediaType, CodeUnsupportedMedia, want+" (metadata and bulk data are not taken)")
	}
	return nil
}

// stowLimits are what readInstances enforces.
type stowLimits struct {
	parts int   // instances
	bytes int64 // the body, and so each part
}

// readInstances reads a STOW-RS body (multipart/related) part by part,
// each part's bytes drawn from the upload's credit as they arrive (nil:
// not counted), and reads each instance's DICOM header. A part that is not
// application/dicom, not DICOM, or whose header does not read, is kept
// with its Failure Reason, its bytes given back; so are the bytes of an
// instance that is not an image. body must already be bounded
// (http.MaxBytesReader).
func readInstances(ctx context.Context, contentType string, body io.Reader, lim stowLimits, cr *credit) ([]*instance, *apiError) {
	var insts []*instance
	rec := &trackedBody{r: io.NopCloser(body)} // sees http.MaxBytesReader's error, which the multipart reader hides
	give := func(b *blob) { cr.giveBack(b.size) }
	err := dicomweb.ReadMultipart(contentType, rec, dicomweb.PartLimits{Parts: lim.parts + 1, PartBytes: lim.bytes, TotalBytes: lim.bytes}, func(p dicomweb.Part) error {
		if len(insts) == lim.parts {
			return errorf(http.StatusRequestEntityTooLarge, CodeTooManyViews, fmt.Sprintf("more than %d instances; send one study", lim.parts))
		}
		in := &instance{n: len(insts) + 1}
		insts = append(insts, in)
		if mt, _, err := mime.ParseMediaType(p.ContentType); p.ContentType != "" && (err != nil || mt != "application/dicom") {
			in.fail(failureCannotUnderstand, "a part of type "+truncate(p.ContentType, 64))
			return nil // ReadMultipart skips the rest of the part
		}
		b, e := readFile(ctx, p.Body, cr)
		if e != nil {
			return e
		}
		if vision.Sniff(b.head(132)) != "dicom" {
			give(b)
			in.fail(failureCannotUnderstand, "not DICOM")
			return nil
		}
		info, err := vision.ReadDICOMInfo(b.reader(), b.len())
		if err != nil {
			give(b)
			in.fail(failureCannotUnderstand, "its DICOM header does not read")
			return nil
		}
		in.info = info
		switch {
		case info.StudyInstanceUID == "" || info.SOPInstanceUID == "":
			give(b)
			in.fail(failureCannotUnderstand, "no Study or SOP Instance UID")
		case !info.HasPixelData || info.Rows == 0 || info.Columns == 0:
			give(b) // taken, not a view
		default:
			in.b = b
		}
		return nil
	})
	if err == nil {
		return insts, nil
	}
	if e, ok := errors.AsType[*apiError](err); ok && e.code != CodeBadRequest {
		return nil, e
	}
	if _, ok := errors.AsType[*http.MaxBytesError](rec.err); ok || errors.Is(err, dicomweb.ErrLimit) {
		return nil, errorf(http.StatusRequestEntityTooLarge, CodeUploadTooLarge, fmt.Sprintf("the upload is larger than %d bytes", lim.bytes))
	}
	return nil, errorf(http.StatusBadRequest, CodeBadRequest, "malformed multipart body")
}

// pickStudy takes the instances of the request's study (target, or when
// it is "" the study of the first image, else of the first instance
// taken), fails the others, and chooses the study's views among its
// images as memtrans.StudiesFromDICOMDir does (internal/dicomviews). It
// returns the upload of those views (their bytes, headers checked against
// maxPixels), giving back the bytes of the images not chosen; or, when no
// instance is taken, a 409 whose body the caller writes.
func pickStudy(insts []*instance, target string, views int, maxPixels int64, res *reservation) (*stowStudy, *upload, *apiError) {
	give := func(in *instance) {
		if res != nil && in.b != nil {
			res.give(in.b.size)
		}
		in.b = nil
	}
	if target == "" {
		for _, in := range insts {
			if in.reason == 0 && in.b != nil {
				target = in.info.StudyInstanceUID
				break
			}
		}
	}
	if target == "" {
		for _, in := range insts {
			if in.reason == 0 {
				target = in.info.StudyInstanceUID
				break
			}
		}
	}
	st := &stowStudy{uid: target, instances: insts}
	var images []vision.DICOMView
	byName := map[string]*instance{}
	taken := 0
	for _, in := range insts {
		if in.reason == 0 && in.info.StudyInstanceUID != target {
			give(in)
			in.fail(failureOtherStudy, "of study "+truncate(in.info.StudyInstanceUID, 64))
		}
		if in.reason != 0 {
			continue
		}
		taken++
		if in.b != nil {
			images = append(images, vision.DICOMView{Path: in.name(), Kind: in.info.View(), Info: in.info})
			byName[in.name()] = in
		}
	}
	switch {
	case taken == 0:
		return st, nil, errorf(http.StatusConflict, CodeInstancesRefused, "none of the instances could be taken")
	case len(images) == 0:
		return st, nil, errorf(http.StatusUnprocessableEntity, CodeViewCount, fmt.Sprintf("none of the %d instances of study %s is an image", taken, truncate(target, 64)))
	case views != 1 && views != 2:
		return st, nil, errorf(http.StatusUnprocessableEntity, CodeViewCount, fmt.Sprintf("the model takes %d views; STOW-RS chooses a frontal view, or a frontal and a lateral", views))
	}
	src, err := dicomviews.Choose(target, images, views)
	if err != nil {
		var msg string
		switch {
		case errors.Is(err, dicomviews.ErrNoFrontal):
			msg = "no frontal view (PA or AP, by View Position or View Code Sequence)"
		case errors.Is(err, dicomviews.ErrNoLateral):
			msg = "no lateral view (by View Position or View Code Sequence)"
		default:
			msg = "images of different patients (PatientID)"
		}
		return st, nil, errorf(http.StatusUnprocessableEntity, CodeViewCount,
			truncate(fmt.Sprintf("study %s has %s among its %d images: %s", target, msg, len(images), dicomviews.Describe(images)), 1024))
	}
	st.src = src
	up := &upload{dicom: src.Views[0].Info}
	for _, v := range src.Views {
		in := byName[v.Path]
		info := in.info
		if int64(info.Columns)*int64(info.Rows) > maxPixels {
			return st, nil, errorf(http.StatusRequestEntityTooLarge, CodeTooManyPixels, fmt.Sprintf("%s is %d×%d; the limit is %d pixels", in.name(), info.Columns, info.Rows, maxPixels))
		}
		up.files = append(up.files, in.b)
		up.names = append(up.names, in.name())
		up.headers = append(up.headers, viewHeader{format: "dicom", w: info.Columns, h: info.Rows, cost: decodeCost("dicom", info.Columns, info.Rows, nil), dicom: info})
	}
	for _, in := range insts {
		if slices.ContainsFunc(src.Views, func(v vision.DICOMView) bool { return v.Path == in.name() }) {
			in.b = nil // the upload holds it now, and decode gives it back
		} else {
			give(in)
		}
	}
	return st, up, nil
}

// storeResponse is the Store Instances Response (PS3.18 Annex I) of a
// request's instances, with the report in the private block when rep is
// given.
func storeResponse(st *stowStudy, studyURL string, rep *stowReport) []byte {
	ds := dicomweb.Dataset{}
	ds[dicomweb.TagKey(dicomweb.TagRetrieveURL)] = text("UR", studyURL)
	var taken, failed []json.RawMessage
	for _, in := range st.instances {
		item := dicomweb.Dataset{}
		if in.info != nil {
			if in.info.SOPClassUID != "" {
				item[dicomweb.TagKey(dicomweb.TagReferencedSOPClassUID)] = text("UI", in.info.SOPClassUID)
			}
			if in.info.SOPInstanceUID != "" {
				item[dicomweb.TagKey(dicomweb.TagReferencedSOPInstanceUID)] = text("UI", in.info.SOPInstanceUID)
			}
		}
		if in.reason != 0 {
			item[dicomweb.TagKey(dicomweb.TagFailureReason)] = dicomweb.Attribute{VR: "US", Value: []json.RawMessage{json.RawMessage(fmt.Sprint(in.reason))}}
			failed = append(failed, mustJSON(item))
			continue
		}
		item[dicomweb.TagKey(dicomweb.TagRetrieveURL)] = dicomweb.Attribute{VR: "UR"} // Type 2: the service keeps no instance
		taken = append(taken, mustJSON(item))
	}
	if len(taken) > 0 {
		ds[dicomweb.TagKey(dicomweb.TagReferencedSOPSequence)] = dicomweb.Attribute{VR: "SQ", Value: taken}
	}
	if len(failed) > 0 {
		ds[dicomweb.TagKey(dicomweb.TagFailedSOPSequence)] = dicomweb.Attribute{VR: "SQ", Value: failed}
	}
	if rep != nil {
		ds[dicomweb.TagKey(TagPrivateCreator)] = text("LO", PrivateCreator)
		ds[dicomweb.TagKey(TagReportSR)] = dicomweb.Attribute{VR: "OB", InlineBinary: base64.StdEncoding.EncodeToString(rep.sr)}
		ds[dicomweb.TagKey(TagReportFHIR)] = text("UT", string(rep.fhir))
		ds[dicomweb.TagKey(TagReportText)] = text("UT", rep.text)
		if rep.srURL != "" {
			ds[dicomweb.TagKey(TagReportSRURL)] = text("UR", rep.srURL)
		}
	}
	return mustJSON(ds)
}

// stowReport is what the STOW-RS answer carries of the report.
type stowReport struct {
	sr    []byte // the DICOM SR, Part 10
	fhir  []byte // the FHIR DiagnosticReport, JSON
	text  string
	srURL string // where the PACS keeps the SR, when stored
}

// text is an attribute of one string value, or none when v is "".
func text(vr, v string) dicomweb.Attribute {
	a := dicomweb.Attribute{VR: vr}
	if v != "" {
		a.Value = []json.RawMessage{mustJSON(v)}
	}
	return a
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("serve: " + err.Error()) // strings and maps of them always marshal
	}
	return b
}

// stowAnswer is the representation of a STOW-RS answer a client asks for
// by its Accept header: the first media range listed that the service
// has (q-values are not weighed); the Store Instances Response otherwise.
func stowAnswer(accept string) string {
	for _, r := range strings.Split(accept, ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(r))
		if err != nil {
			continue
		}
		switch {
		case mt == "multipart/related" && (params["type"] == "" || strings.EqualFold(params["type"], "application/dicom")):
			return "sr"
		case mt == "application/fhir+json":
			return "fhir"
		case mt == "application/dicom+json", mt == "application/json", mt == "application/*", mt == "*/*":
			return "json"
		}
	}
	return "json"
}

// stow serves POST /dicomweb/studies[/{study}]: a study pushed by STOW-RS
// (PS3.18 10.5), reported on through the same path as POST /v1/reports
// (serveStudy), answered with a Store Instances Response carrying the SR
// and the FHIR report, and, with WithPACS, the SR stored into the study
// in the PACS first. It returns the outcome for the metrics when it
// answers itself.
func (h *Handler) stow(w http.ResponseWriter, r *http.Request, start time.Time, target string) (string, *apiError) {
	if target != "" && (len(target) > 64 || !uidRE.MatchString(target)) {
		if strings.Contains(target, "/") {
			return "", errorf(http.StatusNotFound, CodeNotFound, "no such route")
		}
		return "", errorf(http.StatusBadRequest, CodeBadRequest, "the study in the path is not a DICOM UID (dotted decimal, at most 64 characters)")
	}
	ct := r.Header.Get("Content-Type")
	if e := stowMedia(ct); e != nil {
		return "", e
	}
	cfg := h.model.Config()
	var p params
	for name, vals := range r.URL.Query() {
		if name != "beam_size" && name != "max_length" {
			return "", errorf(http.StatusBadRequest, CodeInvalidOption, fmt.Sprintf("unknown option %q (STOW-RS takes beam_size and max_length)", name))
		}
		if e := p.set(name, vals[len(vals)-1], h.o.maxBeam, cfg.MaxSeqLen()); e != nil {
			return "", e
		}
	}
	srModel := dicomsr.Model{Name: h.info.Name, Checksum: h.info.Checksum}
	var st *stowStudy
	var fst fhir.Study
	var srSeries, srInstance string
	read := func(ctx context.Context, body io.Reader, cr *credit) (*upload, *apiError) {
		insts, e := readInstances(ctx, ct, body, stowLimits{parts: h.o.maxInstances, bytes: h.o.maxUpload}, cr)
		if e != nil {
			return nil, e
		}
		var up *upload
		st, up, e = pickStudy(insts, target, cfg.Views, h.o.maxPixels, cr.res)
		if e != nil {
			if e.status == http.StatusConflict {
				e.body, e.ctype = storeResponse(st, "", nil), "application/dicom+json"
			}
			return nil, e
		}
		up.params = p
		return up, nil
	}
	check := func(up *upload) *apiError {
		var e *apiError
		if fst, e = h.fhirStudy(up); e != nil {
			return e
		}
		// The SR too must be possible before any generation.
		srSeries, srInstance = dicomsr.StudyUIDs(st.uid, srModel)
		if _, err := dicomsr.New(memtrans.Report{Text: "-"}, st.src, srModel, time.Now(), dicomsr.WithUIDs(srSeries, srInstance)); err != nil {
			return errorf(http.StatusUnprocessableEntity, CodeBadImage,
				truncate("the DICOM headers cannot make an SR: "+strings.TrimPrefix(err.Error(), dicomsr.ErrInput.Error()+": "), 512))
		}
		return nil
	}
	outcome := "ok"
	respond := func(ctx context.Context, up *upload, rep memtrans.Report, t timings) *apiError {
		now := time.Now()
		if e := emptyReport(rep); e != nil {
			return e
		}
		doc, err := dicomsr.New(rep, st.src, srModel, now, dicomsr.WithUIDs(srSeries, srInstance))
		if err != nil {
			h.o.logger.Error("SR", "study", st.uid, "err", err)
			return errorf(http.StatusInternalServerError, CodeInternal, "the SR could not be written (an empty report?)")
		}
		dr, e := h.fhirReport(rep, fst, now)
		if e != nil {
			return e
		}
		fj := mustJSON(dr)
		var studyURL, srURL string
		if h.o.pacs != nil {
			res, err := h.o.pacs.Store(ctx, st.uid, doc.Bytes())
			if err != nil && ctx.Err() != nil {
				return h.generationError(r, ctx.Err())
			}
			if e := h.srStored(st.uid, srInstance, res, err); e != nil {
				return e
			}
			studyURL = h.o.pacs.URL() + "/studies/" + st.uid
			srURL = studyURL + "/series/" + srSeries + "/instances/" + srInstance
		}
		status := http.StatusOK
		failed := 0
		for _, in := range st.instances {
			if in.reason != 0 {
				failed++
			}
		}
		if failed > 0 {
			status, outcome = http.StatusAccepted, "partial"
		}
		switch stowAnswer(r.Header.Get("Accept")) {
		case "sr":
			var b bytes.Buffer
			var ctype string
			for range 4 {
				b.Reset()
				if ctype, err = dicomweb.WriteMultipart(&b, dicomweb.NewBoundary(), "application/dicom", doc.Bytes()); err == nil {
					break
				}
			}
			if err != nil {
				return errorf(http.StatusInternalServerError, CodeInternal, "the SR could not be sent")
			}
			writeBody(w, status, ctype, b.Bytes())
		case "fhir":
			writeBody(w, status, "application/fhir+json", append(fj, '\n'))
		default:
			writeBody(w, status, "application/dicom+json", storeResponse(st, studyURL, &stowReport{sr: doc.Bytes(), fhir: fj, text: rep.Text, srURL: srURL}))
		}
		h.o.logger.Info("report", "study", st.uid, "route", "stow", "instances", len(st.instances), "failed", failed, "sr", srInstance,
			"stored", srURL != "", "tokens", len(rep.Tokens), "truncated", rep.Truncated, "batch", t.Batch,
			"upload_ms", t.UploadMS, "queue_ms", t.QueueMS, "generate_ms", t.GenerateMS)
		return nil
	}
	if e := h.serveStudy(w, r, start, read, check, respond); e != nil {
		return "", e
	}
	return outcome, nil
}

// srStored checks the PACS's answer to the STOW-RS of the SR whose SOP
// Instance UID is sop (PS3.18 I.2): the SR is stored only when the answer
// lists it in its Referenced SOP Sequence and not in its Failed SOP
// Sequence. A 200 or 202 that does not (an empty body, another instance,
// the SR failed) is a failure like an error answer: logged, counted, and
// answered 502 pacs_error, so that the answer claims no SR the PACS may
// not hold.
func (h *Handler) srStored(study, sop string, res *dicomweb.StoreResult, err error) *apiError {
	var failed *dicomweb.SOPRef
	isSR := func(f dicomweb.SOPRef) bool { return f.InstanceUID == sop }
	if res != nil {
		if i := slices.IndexFunc(res.Failed, isSR); i >= 0 {
			failed = &res.Failed[i]
		}
	}
	// The client's own check (dicomweb.StoreError) says the same of an
	// answer of success: the SR failed, or is missing from it.
	se, notStored := errors.AsType[*dicomweb.StoreError](err)
	if notStored {
		if i := slices.IndexFunc(se.Failed, isSR); i >= 0 && failed == nil {
			failed = &se.Failed[i]
		}
		if failed == nil && slices.Contains(se.Missing, sop) {
			err, res = nil, nil // unconfirmed, below
		}
	}
	switch {
	case failed != nil:
		h.m.pacsStore("refused")
		h.o.logger.Error("the PACS refused the SR", "study", study, "sr", sop, "pacs", h.o.pacs.URL(), "reason", fmt.Sprintf("0x%04X", failed.Reason))
		return errorf(http.StatusBadGateway, CodePACS, fmt.Sprintf("the PACS refused the SR (Failure Reason 0x%04X)", failed.Reason))
	case err != nil:
		h.m.pacsStore("error")
		h.o.logger.Error("storing the SR in the PACS", "study", study, "sr", sop, "pacs", h.o.pacs.URL(), "err", err)
		msg := "the PACS did not take the SR; retry later"
		if se, ok := errors.AsType[*dicomweb.StatusError](err); ok && se.StatusCode < 500 {
			msg = fmt.Sprintf("the PACS refused the SR (%s)", se.Status)
		}
		return errorf(http.StatusBadGateway, CodePACS, msg)
	case res == nil || !slices.ContainsFunc(res.Stored, func(s dicomweb.SOPRef) bool { return s.InstanceUID == sop }):
		h.m.pacsStore("unconfirmed")
		stored := 0
		if res != nil {
			stored = len(res.Stored)
		}
		h.o.logger.Error("the PACS answered without storing the SR: its Referenced SOP Sequence does not list it", "study", study, "sr", sop,
			"pacs", h.o.pacs.URL(), "referenced", stored)
		return errorf(http.StatusBadGateway, CodePACS, "the PACS answered without confirming that it stored the SR; retry later")
	}
	h.m.pacsStore("stored")
	return nil
}

// truncate cuts s to at most n bytes of valid UTF-8, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
