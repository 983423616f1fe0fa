package dicomweb_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
	"github.com/radgen/radgen/memtrans/dicomweb"
)

// TestOrthanc runs every service against a real Orthanc: STOW-RS of two
// studies (storing one again), QIDO-RS by modality, date range and UID at
// the study, series and instance levels, WADO-RS of instances (the bytes
// stored come back) and of metadata, and the errors of a wrong password
// and of an unknown study.
func TestOrthanc(t *testing.T) {
	pacs := orthanctest.Start(t)
	ctx := context.Background()
	cl, err := dicomweb.New(pacs.URL, dicomweb.WithBasicAuth(orthanctest.User, orthanctest.Password))
	if err != nil {
		t.Fatal(err)
	}
	const a, b = "1.2.826.0.1.3680043.8.498.101", "1.2.826.0.1.3680043.8.498.102"
	pa := orthanctest.Film{Study: a, Series: a + ".1", SOP: a + ".1.1", ViewPosition: "PA"}.Bytes()
	ll := orthanctest.Film{Study: a, Series: a + ".2", SOP: a + ".2.1", ViewPosition: "LL"}.Bytes()
	ct := orthanctest.Film{Study: b, Series: b + ".1", SOP: b + ".1.1", Modality: "CR", StudyDate: "20230505"}.Bytes()
	res, err := cl.Store(ctx, a, pa, ll)
	if err != nil || len(res.Stored) != 2 {
		t.Fatalf("store: %v %+v", err, res)
	}
	if _, err := cl.Store(ctx, "", ct); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Store(ctx, a, pa); err != nil {
		t.Errorf("storing an instance again: %v", err)
	}

	uids := func(ds []dicomweb.Dataset, tag uint32) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.String(tag))
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		q    dicomweb.Query
		want []string
	}{
		{dicomweb.Query{}, []string{a, b}},
		{dicomweb.Query{Modalities: []string{"DX"}}, []string{a}},
		{dicomweb.Query{Modalities: []string{"CR", "DX"}}, []string{a, b}},
		{dicomweb.Query{From: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}, []string{a}},
		{dicomweb.Query{To: time.Date(2023, 12, 31, 0, 0, 0, 0, time.UTC)}, []string{b}},
		{dicomweb.Query{StudyInstanceUID: b}, []string{b}},
	} {
		ds, err := cl.SearchStudies(ctx, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := uids(ds, dicomweb.TagStudyInstanceUID); !slices.Equal(got, c.want) {
			t.Errorf("studies %+v: %v, want %v", c.q, got, c.want)
		}
	}
	series, err := cl.SearchSeries(ctx, a, dicomweb.Query{})
	if err != nil || !slices.Equal(uids(series, dicomweb.TagSeriesInstanceUID), []string{a + ".1", a + ".2"}) || series[0].String(dicomweb.TagModality) != "DX" {
		t.Errorf("series: %v %v", err, uids(series, dicomweb.TagSeriesInstanceUID))
	}
	inst, err := cl.SearchInstances(ctx, a, a+".2", dicomweb.Query{})
	if err != nil || !slices.Equal(uids(inst, dicomweb.TagSOPInstanceUID), []string{a + ".2.1"}) {
		t.Errorf("instances: %v %v", err, uids(inst, dicomweb.TagSOPInstanceUID))
	}

	var got [][]byte
	err = cl.Retrieve(ctx, a, "", "", func(p dicomweb.Part) error {
		b, err := io.ReadAll(p.Body)
		got = append(got, b)
		return err
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("retrieve: %v, %d parts", err, len(got))
	}
	for _, want := range [][]byte{pa, ll} {
		if !slices.ContainsFunc(got, func(b []byte) bool { return bytes.Equal(b, want) }) {
			t.Errorf("retrieved instances differ from those stored")
		}
	}
	md, err := cl.Metadata(ctx, a, a+".1", a+".1.1")
	if err != nil || len(md) != 1 || md[0].String(0x00185101) != "PA" {
		t.Errorf("metadata: %v %v", err, md)
	}

	var se *dicomweb.StatusError
	bad, _ := dicomweb.New(pacs.URL, dicomweb.WithBasicAuth(orthanctest.User, "wrong"))
	if _, err := bad.SearchStudies(ctx, dicomweb.Query{}); !errors.As(err, &se) || se.StatusCode != 401 {
		t.Errorf("wrong password: %v", err)
	}
	err = cl.Retrieve(ctx, "1.2.3.4.5", "", "", func(dicomweb.Part) error { return nil })
	if !errors.As(err, &se) || se.StatusCode != 404 || errors.Is(err, dicomweb.ErrUnavailable) {
		t.Errorf("unknown study: %v", err)
	}
	t.Logf("unknown study: %v", err)
}
