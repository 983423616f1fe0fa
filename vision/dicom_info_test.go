package vision

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/radgen/radgen/internal/testutil"
)

// infoEnc writes DICOM elements in one encoding (test helper).
type infoEnc struct {
	bo       binary.ByteOrder
	implicit bool
}

var (
	infoExplicitLE = infoEnc{binary.LittleEndian, false}
	infoImplicitLE = infoEnc{binary.LittleEndian, true}
	infoExplicitBE = infoEnc{binary.BigEndian, false}
)

func (e infoEnc) tag(b *bytes.Buffer, g, el uint16) {
	var t [4]byte
	e.bo.PutUint16(t[:], g)
	e.bo.PutUint16(t[2:], el)
	b.Write(t[:])
}

// elem writes one element; text values are padded to even length.
func (e infoEnc) elem(g, el uint16, vr string, val []byte) []byte {
	if len(val)%2 == 1 {
		pad := byte(' ')
		if vr == "UI" || vr == "OB" {
			pad = 0
		}
		val = append(append([]byte(nil), val...), pad)
	}
	return e.raw(g, el, vr, uint32(len(val)), val)
}

// raw writes an element with a given length field, whatever val holds.
func (e infoEnc) raw(g, el uint16, vr string, vl uint32, val []byte) []byte {
	var b bytes.Buffer
	e.tag(&b, g, el)
	var n [4]byte
	switch {
	case e.implicit || g == 0xfffe:
		e.bo.PutUint32(n[:], vl)
		b.Write(n[:])
	case strings.Contains("OB OD OF OL OV OW SQ UC UN UR UT SV UV", vr):
		b.WriteString(vr)
		b.Write([]byte{0, 0})
		e.bo.PutUint32(n[:], vl)
		b.Write(n[:])
	default:
		b.WriteString(vr)
		e.bo.PutUint16(n[:], uint16(vl))
		b.Write(n[:2])
	}
	b.Write(val)
	return b.Bytes()
}

func (e infoEnc) text(g, el uint16, vr, s string) []byte { return e.elem(g, el, vr, []byte(s)) }

func (e infoEnc) us(g, el uint16, v uint16) []byte {
	var b [2]byte
	e.bo.PutUint16(b[:], v)
	return e.elem(g, el, "US", b[:])
}

// seq writes a sequence of items, of undefined length (with delimiters)
// or of defined length.
func (e infoEnc) seq(g, el uint16, undefined bool, items ...[]byte) []byte {
	var body bytes.Buffer
	for _, it := range items {
		if undefined {
			body.Write(e.raw(0xfffe, 0xe000, "", infoUndefined, it))
			body.Write(e.raw(0xfffe, 0xe00d, "", 0, nil))
		} else {
			body.Write(e.raw(0xfffe, 0xe000, "", uint32(len(it)), it))
		}
	}
	if undefined {
		body.Write(e.raw(0xfffe, 0xe0dd, "", 0, nil))
		return e.raw(g, el, "SQ", infoUndefined, body.Bytes())
	}
	return e.raw(g, el, "SQ", uint32(body.Len()), body.Bytes())
}

func infoCat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// infoPart10 wraps a data set in a preamble and file meta group.
func infoPart10(ts string, body []byte) []byte {
	m := infoExplicitLE
	meta := infoCat(
		m.elem(0x0002, 0x0001, "OB", []byte{0, 1}),
		m.text(0x0002, 0x0002, "UI", "1.2.840.10008.5.1.4.1.1.1"),
		m.text(0x0002, 0x0003, "UI", "1.2.3.4.5.6"),
		m.text(0x0002, 0x0010, "UI", ts),
	)
	var gl [4]byte
	binary.LittleEndian.PutUint32(gl[:], uint32(len(meta)))
	out := make([]byte, 128, 128+4+len(meta)+12+len(body))
	out = append(out, "DICM"...)
	out = append(out, m.elem(0x0002, 0x0000, "UL", gl[:])...)
	out = append(out, meta...)
	return append(out, body...)
}

// infoDataSet is a chest film's data set in encoding e: identification,
// patient and study attributes, a View Code Sequence, other sequences to
// skip, and 4×2 pixels.
func infoDataSet(e infoEnc, undefinedSeqs bool) []byte {
	viewItem := infoCat(
		e.text(0x0008, 0x0100, "SH", "399348003"),
		e.text(0x0008, 0x0102, "SH", "SCT"),
		e.text(0x0008, 0x0104, "LO", "antero-posterior"),
		// View Modifier Code Sequence, nested: skipped.
		e.seq(0x0054, 0x0222, undefinedSeqs, e.text(0x0008, 0x0100, "SH", "X"), e.text(0x0008, 0x0102, "SH", "Y")),
	)
	return infoCat(
		e.text(0x0008, 0x0005, "CS", "ISO_IR 100"),
		e.text(0x0008, 0x0016, "UI", "1.2.840.10008.5.1.4.1.1.1"),
		e.text(0x0008, 0x0018, "UI", "1.2.3.4.5.6"),
		e.text(0x0008, 0x0020, "DA", "20240102"),
		e.text(0x0008, 0x0030, "TM", "101500"),
		e.text(0x0008, 0x0050, "SH", "ACC1"),
		e.text(0x0008, 0x0060, "CS", "CR"),
		e.text(0x0008, 0x0090, "PN", "Who^Doctor"),
		// Procedure Code Sequence: not kept, skipped whole.
		e.seq(0x0008, 0x1032, undefinedSeqs, e.text(0x0008, 0x0100, "SH", "CHEST"), e.text(0x0008, 0x0104, "LO", "not a view")),
		e.elem(0x0009, 0x1001, "OB", bytes.Repeat([]byte{7}, 300)), // private, skipped
		e.elem(0x0010, 0x0010, "PN", []byte("M\xfcller^J\xf6rg")),  // Latin-1
		e.text(0x0010, 0x0020, "LO", "PID-1 "),
		e.text(0x0010, 0x0030, "DA", "19700101"),
		e.text(0x0010, 0x0040, "CS", "F"),
		e.text(0x0018, 0x0015, "CS", "CHEST"),
		e.text(0x0018, 0x5101, "CS", "PA"),
		e.text(0x0020, 0x000d, "UI", "1.2.3.4"),
		e.text(0x0020, 0x000e, "UI", "1.2.3.4.5"),
		e.text(0x0020, 0x0011, "IS", "3"),
		e.text(0x0020, 0x0013, "IS", "7"),
		e.us(0x0028, 0x0010, 2),
		e.us(0x0028, 0x0011, 4),
		e.seq(0x0054, 0x0220, undefinedSeqs, viewItem),
		e.elem(0x7fe0, 0x0010, "OW", make([]byte, 16)),
	)
}

var infoWant = DICOMInfo{
	SOPClassUID: "1.2.840.10008.5.1.4.1.1.1", SOPInstanceUID: "1.2.3.4.5.6",
	StudyInstanceUID: "1.2.3.4", SeriesInstanceUID: "1.2.3.4.5",
	PatientName: "Müller^Jörg", PatientID: "PID-1", PatientBirthDate: "19700101", PatientSex: "F",
	StudyDate: "20240102", StudyTime: "101500", AccessionNumber: "ACC1", ReferringPhysicianName: "Who^Doctor",
	SeriesNumber: "3", InstanceNumber: "7", Modality: "CR", BodyPartExamined: "CHEST", ViewPosition: "PA",
	ViewCodes: []DICOMCode{{Value: "399348003", Scheme: "SCT", Meaning: "antero-posterior"}},
	Rows:      2, Columns: 4, CharacterSet: "ISO_IR 100", HasPixelData: true,
}

func deflateBytes(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	w, _ := flate.NewWriter(&out, flate.BestCompression)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestReadDICOMInfoEncodings(t *testing.T) {
	cases := map[string]struct {
		file []byte
		ts   string
	}{
		"explicit LE, defined lengths": {infoPart10("1.2.840.10008.1.2.1", infoDataSet(infoExplicitLE, false)), "1.2.840.10008.1.2.1"},
		"explicit LE, undefined":       {infoPart10("1.2.840.10008.1.2.1", infoDataSet(infoExplicitLE, true)), "1.2.840.10008.1.2.1"},
		"implicit LE":                  {infoPart10("1.2.840.10008.1.2", infoDataSet(infoImplicitLE, true)), "1.2.840.10008.1.2"},
		"implicit LE, defined":         {infoPart10("1.2.840.10008.1.2", infoDataSet(infoImplicitLE, false)), "1.2.840.10008.1.2"},
		"explicit BE":                  {infoPart10("1.2.840.10008.1.2.2", infoDataSet(infoExplicitBE, true)), "1.2.840.10008.1.2.2"},
		"JPEG baseline (explicit LE)":  {infoPart10("1.2.840.10008.1.2.4.50", infoDataSet(infoExplicitLE, true)), "1.2.840.10008.1.2.4.50"},
		"bare implicit":                {infoDataSet(infoImplicitLE, true), "1.2.840.10008.1.2"},
		"bare explicit":                {infoDataSet(infoExplicitLE, false), "1.2.840.10008.1.2.1"},
	}
	cases["deflated"] = struct {
		file []byte
		ts   string
	}{infoPart10("1.2.840.10008.1.2.1.99", deflateBytes(t, infoDataSet(infoExplicitLE, true))), "1.2.840.10008.1.2.1.99"}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadDICOMInfo(bytes.NewReader(c.file), int64(len(c.file)))
			if err != nil {
				t.Fatal(err)
			}
			want := infoWant
			want.TransferSyntax = c.ts
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("got  %+v\nwant %+v", *got, want)
			}
		})
	}
}

// TestReadDICOMInfoUN: a sequence of unknown VR and undefined length is
// implicit VR inside an explicit data set (PS3.5 6.2.2), and is skipped.
func TestReadDICOMInfoUN(t *testing.T) {
	e, i := infoExplicitLE, infoImplicitLE
	un := e.raw(0x0009, 0x1010, "UN", infoUndefined, infoCat(
		i.raw(0xfffe, 0xe000, "", infoUndefined, i.text(0x0009, 0x1011, "", "odd")),
		i.raw(0xfffe, 0xe00d, "", 0, nil),
		i.raw(0xfffe, 0xe0dd, "", 0, nil),
	))
	file := infoPart10("1.2.840.10008.1.2.1", infoCat(e.text(0x0008, 0x0018, "UI", "1.2.3"), un, e.text(0x0020, 0x000d, "UI", "1.2.3.4")))
	got, err := ReadDICOMInfo(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatal(err)
	}
	if got.SOPInstanceUID != "1.2.3" || got.StudyInstanceUID != "1.2.3.4" || got.HasPixelData {
		t.Fatalf("%+v", got)
	}
}

func TestReadDICOMInfoCharacterSets(t *testing.T) {
	e := infoExplicitLE
	for _, c := range []struct {
		cs, raw, want string
		unknown       bool
	}{
		{"", "J\xf6rg", "Jörg", false},
		{"ISO_IR 192", "Jörg", "Jörg", false},
		{"ISO_IR 192", "J\xf6rg", "J\ufffdrg", true}, // not UTF-8
		{"ISO 2022 IR 87", "Yamada\x1b$B;3ED\x1b(B", "Yamada\x1b$B;3ED\x1b(B", false},
		{"GB18030", "\xd5\xc5", "\ufffd\ufffd", true},
	} {
		ds := e.text(0x0010, 0x0010, "PN", c.raw)
		if c.cs != "" {
			ds = infoCat(e.text(0x0008, 0x0005, "CS", c.cs), ds)
		}
		file := infoPart10("1.2.840.10008.1.2.1", ds)
		got, err := ReadDICOMInfo(bytes.NewReader(file), int64(len(file)))
		if err != nil {
			t.Fatal(err)
		}
		if got.PatientName != c.want || got.UnknownCharacter != c.unknown {
			t.Errorf("%s %q: got %q (unknown %v), want %q (%v)", c.cs, c.raw, got.PatientName, got.UnknownCharacter, c.want, c.unknown)
		}
	}
}

// TestReadDICOMInfoHostile: lying lengths, deep nesting and oversized
// values are errors, never panics or allocations by the declared size.
func TestReadDICOMInfoHostile(t *testing.T) {
	e := infoExplicitLE
	good := infoPart10("1.2.840.10008.1.2.1", infoDataSet(e, true))
	deep := e.text(0x0008, 0x0100, "SH", "X")
	for range maxInfoDepth + 1 {
		deep = e.seq(0x0008, 0x1032, true, deep)
	}
	cases := map[string]struct {
		file []byte
		want error
	}{
		"not DICOM":          {[]byte("hello, world: not a DICOM file at all, only text padding out to the preamble"), ErrDICOM},
		"empty":              {nil, ErrDICOM},
		"truncated":          {good[:len(good)-30], ErrDICOM},
		"truncated meta":     {good[:140], ErrDICOM},
		"length beyond file": {infoPart10("1.2.840.10008.1.2.1", e.raw(0x0009, 0x1001, "OB", 0xfffffff0, []byte{1, 2})), ErrDICOM},
		"kept value too long": {infoPart10("1.2.840.10008.1.2.1",
			e.raw(0x0010, 0x0020, "UT", 4000, make([]byte, 4000))), ErrDICOM},
		"sequences too deep": {infoPart10("1.2.840.10008.1.2.1", deep), ErrDICOM},
		"item at top level":  {infoPart10("1.2.840.10008.1.2.1", e.raw(0xfffe, 0xe000, "", 4, []byte("abcd"))), ErrDICOM},
		"no VR":              {infoPart10("1.2.840.10008.1.2.1", e.raw(0x0010, 0x0020, "zz", 2, []byte("ab"))), ErrDICOM},
		"rows not US":        {infoPart10("1.2.840.10008.1.2.1", e.text(0x0028, 0x0010, "IS", "512")), ErrDICOM},
		"item overruns sequence": {infoPart10("1.2.840.10008.1.2.1", e.raw(0x0054, 0x0220, "SQ", 8,
			e.raw(0xfffe, 0xe000, "", 40, e.text(0x0008, 0x0100, "SH", "12345678901234567890123456789012")))), ErrDICOM},
		"meta without syntax": {infoCat(make([]byte, 128), []byte("DICM"), e.text(0x0002, 0x0003, "UI", "1.2")), ErrDICOM},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadDICOMInfo(bytes.NewReader(c.file), int64(len(c.file)))
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// A header past the 64 MiB bound: a stream of that size, never held.
	t.Run("header too long", func(t *testing.T) {
		n := int64(maxInfoHeader + 1024)
		head := infoPart10("1.2.840.10008.1.2.1", e.raw(0x0009, 0x1001, "OB", uint32(n), nil))
		r := io.MultiReader(bytes.NewReader(head), io.LimitReader(infoZeros{}, n))
		_, err := ReadDICOMInfo(r, int64(len(head))+n)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("got %v, want ErrTooLarge", err)
		}
	})
}

type infoZeros struct{}

func (infoZeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestReadDICOMInfoStopsAtPixels: nothing after Pixel Data is read.
func TestReadDICOMInfoStopsAtPixels(t *testing.T) {
	good := infoPart10("1.2.840.10008.1.2.1", infoDataSet(infoExplicitLE, true))
	// Pixel Data declares 16 bytes; give the reader only its header.
	cut := len(good) - 16
	r := &infoCountingReader{r: bytes.NewReader(good[:cut])}
	info, err := ReadDICOMInfo(r, int64(len(good)))
	if err != nil || !info.HasPixelData {
		t.Fatalf("%v %+v", err, info)
	}
}

type infoCountingReader struct {
	r io.Reader
	n int
}

func (c *infoCountingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestReadDICOMInfoReal reads the real files of $RADGEN_REAL_DICOM and,
// when dcmtk is installed, compares every attribute with dcmdump's.
func TestReadDICOMInfoReal(t *testing.T) {
	dir := testutil.Dir(t, "RADGEN_REAL_DICOM", "real/dicom")
	var files []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".dcm") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Skipf("no .dcm files in %s", dir)
	}
	dcmdump, _ := exec.LookPath("dcmdump")
	if dcmdump == "" {
		t.Log("dcmdump not installed (apt-get install dcmtk): checking the attributes' form only")
	}
	uid := regexp.MustCompile(`^[0-9]+(\.[0-9]+)+$`)
	for _, f := range files {
		rel, _ := filepath.Rel(dir, f)
		t.Run(rel, func(t *testing.T) {
			info, err := ReadDICOMInfoFile(f)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v, %d×%d", rel, info, info.Columns, info.Rows)
			if !uid.MatchString(info.SOPInstanceUID) || !uid.MatchString(info.StudyInstanceUID) || !info.HasPixelData || info.Rows == 0 || info.Columns == 0 {
				t.Fatalf("incomplete: %+v", info)
			}
			if dcmdump == "" {
				return
			}
			want := infoDcmdump(t, dcmdump, f)
			for tg, got := range map[string]string{
				"0008,0018": info.SOPInstanceUID, "0020,000d": info.StudyInstanceUID, "0020,000e": info.SeriesInstanceUID,
				"0010,0020": info.PatientID, "0008,0050": info.AccessionNumber, "0018,5101": info.ViewPosition,
				"0008,0020": info.StudyDate, "0008,0060": info.Modality,
				"0028,0010": strconv.Itoa(info.Rows), "0028,0011": strconv.Itoa(info.Columns),
			} {
				if want[tg] != got {
					t.Errorf("(%s): got %q, dcmdump %q", tg, got, want[tg])
				}
			}
		})
	}
}

// infoDcmdump returns the values dcmdump prints for the top-level
// attributes compared ("" if absent or empty).
func infoDcmdump(t *testing.T, dcmdump, file string) map[string]string {
	args := []string{"-q", "+L", "-s"}
	for _, tg := range []string{"0008,0018", "0020,000d", "0020,000e", "0010,0020", "0008,0050", "0018,5101", "0008,0020", "0008,0060", "0028,0010", "0028,0011"} {
		args = append(args, "+P", tg)
	}
	out, err := exec.Command(dcmdump, append(args, file)...).Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("dcmdump %s: %v", file, err)
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) < 15 || line[0] != '(' || line[10] != ')' {
			continue
		}
		tg, vr := line[1:10], line[12:14]
		rest := strings.TrimSpace(line[14:])
		if i := strings.Index(rest, "#"); i >= 0 {
			rest = strings.TrimSpace(rest[:i])
		}
		switch {
		case strings.HasPrefix(rest, "(no value"):
			rest = ""
		case vr == "UN":
			// dcmdump prints an element of unknown VR as hex bytes: the
			// text itself, as it was written.
			var b []byte
			for _, h := range strings.Split(rest, `\`) {
				v, err := strconv.ParseUint(h, 16, 8)
				if err != nil {
					t.Fatalf("dcmdump printed %q for (%s)", rest, tg)
				}
				b = append(b, byte(v))
			}
			rest = infoTrim(string(b))
		default:
			rest = strings.TrimSpace(strings.Trim(rest, "[]"))
		}
		if _, seen := vals[tg]; !seen {
			vals[tg] = rest
		}
	}
	return vals
}

func FuzzReadDICOMInfo(f *testing.F) {
	for _, e := range []infoEnc{infoExplicitLE, infoImplicitLE, infoExplicitBE} {
		f.Add(infoPart10(map[bool]string{true: "1.2.840.10008.1.2", false: "1.2.840.10008.1.2.1"}[e.implicit], infoDataSet(e, true)))
		f.Add(infoDataSet(e, false))
	}
	f.Add(infoPart10("1.2.840.10008.1.2.2", infoDataSet(infoExplicitBE, false)))
	f.Add(infoPart10("1.2.840.10008.1.2.1.99", deflateBytes(f, infoDataSet(infoExplicitLE, true))))
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ReadDICOMInfo(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, ErrDICOM) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v wraps neither ErrDICOM nor ErrTooLarge", err)
			}
			return
		}
		if len(info.ViewCodes) > maxInfoCodes || len(info.PatientName) > 3*maxInfoValue {
			t.Fatalf("unbounded result: %d codes, name of %d bytes", len(info.ViewCodes), len(info.PatientName))
		}
		// Deterministic: a second read agrees.
		again, err := ReadDICOMInfo(bytes.NewReader(b), int64(len(b)))
		if err != nil || !reflect.DeepEqual(info, again) {
			t.Fatalf("second read differs: %v", err)
		}
	})
}

// TestReadDICOMInfoAllocations: what ReadDICOMInfo allocates does not grow
// with the lengths a file declares, nor with the header bytes it skips.
func TestReadDICOMInfoAllocations(t *testing.T) {
	e := infoExplicitLE
	lying := infoPart10("1.2.840.10008.1.2.1", e.raw(0x0009, 0x1001, "OB", 0xfffffff0, []byte{1, 2}))
	n := int64(32 << 20)
	long := infoPart10("1.2.840.10008.1.2.1", infoCat(e.raw(0x0009, 0x1001, "OB", uint32(n), nil)))
	for name, run := range map[string]func() error{
		"4 GiB declared in a short file": func() error {
			_, err := ReadDICOMInfo(bytes.NewReader(lying), int64(len(lying)))
			return err
		},
		"32 MiB of private data skipped": func() error {
			r := io.MultiReader(bytes.NewReader(long), io.LimitReader(infoZeros{}, n), bytes.NewReader(e.text(0x0020, 0x000d, "UI", "1.2.3")))
			info, err := ReadDICOMInfo(r, int64(len(long))+n+16)
			if err == nil && info.StudyInstanceUID != "1.2.3" {
				t.Errorf("after the skip: %+v", info)
			}
			return err
		},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		err := run()
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: %v, %d bytes allocated", name, err, alloc)
		if alloc > 256<<10 {
			t.Errorf("%s: %d bytes allocated, want under 256 KiB", name, alloc)
		}
	}
}
