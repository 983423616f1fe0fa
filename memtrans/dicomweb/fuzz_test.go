package dicomweb

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzParseJSON: any answer parses or fails with ErrMalformed or ErrLimit,
// never panics; what parses reads back through the accessors.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{studyJSON, `{}`, `[]`, `[{}]`, `[null]`, `{"00081199":{"vr":"SQ","Value":[{"00081155":{"vr":"UI","Value":["1.2"]}}]}}`,
		`[{"0020000d":{"vr":"UI","Value":[null,1e999,"x",{"Alphabetic":"A"}]}}]`, `[{"zz":{}}]`, `[1,2]`, `[{}]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := ParseJSON(b, 8)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) {
				t.Fatalf("unwrapped error %v", err)
			}
			return
		}
		if len(ds) > 8 {
			t.Fatalf("%d datasets past the limit", len(ds))
		}
		for _, d := range ds {
			for k := range d {
				var tag uint32
				for _, c := range k {
					tag <<= 4
					switch {
					case c >= '0' && c <= '9':
						tag |= uint32(c - '0')
					default:
						tag |= uint32(c-'A') + 10
					}
				}
				d.Strings(tag)
				d.Int(tag)
				if _, err := d.Items(tag); err != nil && !errors.Is(err, ErrMalformed) {
					t.Fatal(err)
				}
			}
		}
	})
}

// FuzzReadMultipart: any body is read within its limits or refused with
// ErrMalformed, ErrTruncated or ErrLimit, never panics; a body written by WriteMultipart
// reads back.
func FuzzReadMultipart(f *testing.F) {
	var body bytes.Buffer
	WriteMultipart(&body, "XB", "application/dicom", []byte("DICM a"), []byte("second\r\n-"))
	f.Add(body.Bytes(), "XB")
	f.Add([]byte("--XB\r\nContent-Type: application/dicom\r\n\r\nabc\r\n--XB--\r\n"), "XB")
	f.Add([]byte("--XB\r\n\r\n"), "XB")
	f.Add([]byte(""), "")
	f.Add([]byte("--a\r\nContent-Length: 99999999999\r\n\r\nx\r\n--a--"), "a")
	f.Fuzz(func(t *testing.T, b []byte, boundary string) {
		ct := `multipart/related; type="application/dicom"; boundary="` + boundary + `"`
		lim := PartLimits{Parts: 4, PartBytes: 64, TotalBytes: 512}
		var total int64
		err := ReadMultipart(ct, bytes.NewReader(b), lim, func(p Part) error {
			n, err := io.Copy(io.Discard, p.Body)
			if n > lim.PartBytes {
				t.Fatalf("part of %d bytes past the limit", n)
			}
			total += n
			return err
		})
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrLimit) && !errors.Is(err, ErrTruncated) {
			t.Fatalf("unwrapped error %v", err)
		}
		if total > lim.TotalBytes {
			t.Fatalf("%d bytes past the total limit", total)
		}
	})
}

// FuzzSOPInstanceUID: any bytes give a UID found inside them or none,
// never a panic; a file written with a UID gives it back.
func FuzzSOPInstanceUID(f *testing.F) {
	f.Add(part10("1.2.3.4"))
	f.Add(part10(""))
	f.Add(append(make([]byte, 128), "DICM\x02\x00\x03\x00UI\xff\xff1.2"...))
	f.Add(append(make([]byte, 128), "DICM\x02\x00\x01\x00OB\x00\x00\xff\xff\xff\xff"...))
	f.Add([]byte("DICM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		uid, ok := sopInstanceUID(b)
		if ok != (uid != "") || ok && !bytes.Contains(b, []byte(uid)) {
			t.Fatalf("%q %v", uid, ok)
		}
	})
	if uid, ok := sopInstanceUID(part10("1.2.3.45")); uid != "1.2.3.45" || !ok {
		f.Errorf("written 1.2.3.45, read %q %v", uid, ok)
	}
}

// TestMultipartRoundTrip: parts written by WriteMultipart read back
// whole, and a part holding the boundary is refused.
func TestMultipartRoundTrip(t *testing.T) {
	parts := [][]byte{[]byte("DICM\x00\x01"), {}, bytes.Repeat([]byte("\r\n-"), 100)}
	var body bytes.Buffer
	ct, err := WriteMultipart(&body, NewBoundary(), "application/dicom", parts...)
	if err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	err = ReadMultipart(ct, &body, PartLimits{10, 1 << 10, 1 << 12}, func(p Part) error {
		b, err := io.ReadAll(p.Body)
		got = append(got, b)
		if p.ContentType != "application/dicom" {
			t.Errorf("part type %q", p.ContentType)
		}
		return err
	})
	if err != nil || len(got) != 3 || !bytes.Equal(got[0], parts[0]) || len(got[1]) != 0 || !bytes.Equal(got[2], parts[2]) {
		t.Fatalf("%v %q", err, got)
	}
	if _, err := WriteMultipart(io.Discard, "XB", "application/dicom", []byte("a\r\n--XB b")); !errors.Is(err, ErrInput) {
		t.Errorf("part holding the boundary: %v", err)
	}
}
