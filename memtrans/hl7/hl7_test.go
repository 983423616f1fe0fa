package hl7_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/vision"
)

var (
	testTime  = time.Date(2026, 11, 24, 9, 30, 15, 0, time.UTC)
	testModel = hl7.Model{Name: "radgen R2Gen IU X-Ray", Version: "0.1.0", Checksum: "sha256:9f86d081", DeviceUID: "2.25.1234"}
)

func testStudy() *vision.DICOMStudy {
	info := &vision.DICOMInfo{
		StudyInstanceUID: "1.2.826.0.1.3680043.8.498.7", SeriesInstanceUID: "1.2.826.0.1.3680043.8.498.7.1",
		SOPClassUID: "1.2.840.10008.5.1.4.1.1.1.1", SOPInstanceUID: "1.2.826.0.1.3680043.8.498.7.1.1",
		PatientID: "PID|7", PatientName: "Müller^Jane^Q^Dr^PhD", PatientBirthDate: "19700102", PatientSex: "F",
		AccessionNumber: "ACC^42", StudyDate: "20240102", StudyTime: "101500.25",
	}
	return &vision.DICOMStudy{StudyInstanceUID: info.StudyInstanceUID, Views: []vision.DICOMView{{Path: "pa.dcm", Kind: vision.ViewFrontal, Info: info}}}
}

const reportText = "the heart is normal in size .\nno pneumothorax & no effusion ."

func newORU(t *testing.T) []byte {
	t.Helper()
	msg, err := hl7.NewORU(memtrans.Report{Text: reportText}, testStudy(), testModel, testTime, hl7.WithReceiver("RIS", "GENERAL"))
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestORUFields: the message's segments carry the identifiers, the
// report, status P and the producer, escaped, as ParseMessage reads them.
func TestORUFields(t *testing.T) {
	msg := newORU(t)
	t.Logf("%s", strings.ReplaceAll(string(msg), "\r", "\n"))
	m, err := hl7.ParseMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range m.Segments {
		names = append(names, s[0])
	}
	if got := strings.Join(names, " "); got != "MSH PID ORC OBR ZDS OBX OBX OBX" {
		t.Errorf("segments %s", got)
	}
	for _, c := range []struct {
		seg  string
		n    int
		want string
	}{
		{"MSH", 3, "RADGEN"}, {"MSH", 5, "RIS"}, {"MSH", 9, "ORU^R01^ORU_R01"}, {"MSH", 10, hl7.ControlID("1.2.826.0.1.3680043.8.498.7", testModel)},
		{"MSH", 12, "2.5.1"}, {"MSH", 18, "UNICODE UTF-8"}, {"MSH", 7, "20261124093015+0000"},
		{"PID", 3, `PID\F\7`}, {"PID", 5, "Müller^Jane^Q^PhD^Dr"}, {"PID", 7, "19700102"}, {"PID", 8, "F"},
		{"OBR", 3, `ACC\S\42`}, {"OBR", 18, `ACC\S\42`}, {"OBR", 4, "18748-4^Diagnostic Imaging Report^LN"}, {"OBR", 7, "20240102101500"}, {"OBR", 25, "P"},
		{"ZDS", 1, "1.2.826.0.1.3680043.8.498.7^RADGEN^Application^DICOM"},
		{"OBX", 2, "TX"}, {"OBX", 5, "the heart is normal in size ."}, {"OBX", 11, "P"},
		{"OBX", 15, "2.25.1234^radgen R2Gen IU X-Ray 0.1.0^99RADGEN"}, {"OBX", 18, "radgen R2Gen IU X-Ray^^2.25.1234^ISO"},
	} {
		if got := m.Field(c.seg, c.n); got != c.want {
			t.Errorf("%s-%d = %q, want %q", c.seg, c.n, got, c.want)
		}
	}
	if last := m.Segments[len(m.Segments)-1]; last[5] != "1.2.826.0.1.3680043.8.498.7" || last[3] != "110180^Study Instance UID^DCM" {
		t.Errorf("last OBX %v", last)
	}
	if m.Segments[6][5] != `no pneumothorax \T\ no effusion .` {
		t.Errorf("second line %q", m.Segments[6][5])
	}
	if _, err := hl7.NewORU(memtrans.Report{Text: " "}, testStudy(), testModel, testTime); !errors.Is(err, hl7.ErrInput) {
		t.Errorf("empty report: %v", err)
	}
}

// python returns a Python 3 that imports Debian's python3-hl7, or skips.
func python(t *testing.T) string {
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-c", "import hl7").Run() == nil {
			return path
		}
	}
	t.Skip("no Python 3 with the hl7 module (apt-get install python3-hl7; .ci/run does): the independent parse is not checked")
	return ""
}

// TestPythonHL7: python-hl7, an independent parser, reads the message and
// finds the report, the identifiers and status P.
func TestPythonHL7(t *testing.T) {
	py := python(t)
	p := filepath.Join(t.TempDir(), "oru.hl7")
	if err := os.WriteFile(p, newORU(t), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import hl7, json, sys
m = hl7.parse(open(sys.argv[1], encoding="utf-8", newline="").read())
obx = m.segments("OBX")
print(json.dumps({
  "type": str(m.segment("MSH")[9]), "control": str(m.segment("MSH")[10]),
  "pid": hl7.unescape(m, str(m.segment("PID")[3])) if hasattr(hl7, "unescape") else m.unescape(str(m.segment("PID")[3])),
  "family": str(m.segment("PID")[5][0][0]),
  "accession": m.unescape(str(m.segment("OBR")[3])), "status": str(m.segment("OBR")[25]),
  "study": str(m.segment("ZDS")[1][0][0]),
  "text": [m.unescape(str(s[5])) for s in obx if str(s[2]) == "TX"],
  "obx_status": sorted({str(s[11]) for s in obx}),
  "producer": str(obx[0][15]),
}))`
	out, err := exec.Command(py, "-c", script, p).CombinedOutput()
	if err != nil {
		t.Fatalf("python-hl7: %v\n%s", err, out)
	}
	t.Logf("python-hl7 read: %s", out)
	var got struct {
		Type, Control, PID, Family, Accession, Status, Study, Producer string
		Text, OBXStatus                                                []string `json:"-"`
	}
	var raw map[string]any
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(raw)
	json.Unmarshal(b, &got)
	text := strings.Join(toStrings(raw["text"]), "\n")
	if got.Type != "ORU^R01^ORU_R01" || got.Control != hl7.ControlID("1.2.826.0.1.3680043.8.498.7", testModel) || got.PID != "PID|7" ||
		got.Family != "Müller" || got.Accession != "ACC^42" || got.Status != "P" || got.Study != "1.2.826.0.1.3680043.8.498.7" ||
		text != reportText || strings.Join(toStrings(raw["obx_status"]), ",") != "P" || !strings.Contains(got.Producer, "radgen R2Gen") {
		t.Errorf("python-hl7 read %s", out)
	}
}

func toStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// listener is a test MLLP receiver: it answers each message with code.
type listener struct {
	ln   net.Listener
	code string
	mu   sync.Mutex
	got  [][]byte
	wg   sync.WaitGroup
}

func listen(t *testing.T, code string) *listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{ln: ln, code: code}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			msg, err := hl7.ReadFrame(r, 1<<20)
			if err == nil {
				l.mu.Lock()
				l.got = append(l.got, msg)
				l.mu.Unlock()
				if l.code != "" {
					ack, _ := hl7.NewACK(msg, l.code, "checked by the test listener", testTime)
					hl7.WriteFrame(c, ack)
				} else {
					r.ReadByte() // never answer: wait for the sender to give up
				}
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); l.wg.Wait() })
	return l
}

// TestMLLP: the sender gets its ACK from a listener; a NAK is an error
// carrying the code; no answer within the timeout and no listener are
// ErrUnavailable.
func TestMLLP(t *testing.T) {
	ctx := context.Background()
	msg := newORU(t)
	ok := listen(t, "AA")
	ack, err := (&hl7.Sender{Addr: ok.ln.Addr().String()}).Send(ctx, msg)
	if err != nil || ack.Code != "AA" || ack.ControlID != hl7.ControlID("1.2.826.0.1.3680043.8.498.7", testModel) {
		t.Fatalf("ACK: %v %+v", err, ack)
	}
	if len(ok.got) != 1 || string(ok.got[0]) != string(msg) {
		t.Errorf("the listener got %d messages", len(ok.got))
	}
	nak := listen(t, "AE")
	_, err = (&hl7.Sender{Addr: nak.ln.Addr().String()}).Send(ctx, msg)
	var ne *hl7.NAKError
	if !errors.As(err, &ne) || ne.Ack.Code != "AE" || ne.Ack.Text != "checked by the test listener" || errors.Is(err, hl7.ErrUnavailable) {
		t.Errorf("NAK: %v", err)
	}
	silent := listen(t, "")
	if _, err = (&hl7.Sender{Addr: silent.ln.Addr().String(), Timeout: 50 * time.Millisecond}).Send(ctx, msg); !errors.Is(err, hl7.ErrUnavailable) {
		t.Errorf("no answer: %v", err)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	if _, err = (&hl7.Sender{Addr: addr}).Send(ctx, msg); !errors.Is(err, hl7.ErrUnavailable) {
		t.Errorf("no listener: %v", err)
	}
}
