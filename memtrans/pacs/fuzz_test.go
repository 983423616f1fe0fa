package pacs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzParseDeadLetters: any file reads, never panics: each entry kept has
// a valid study UID and a bounded one-line error, and every other
// non-empty line is reported skipped.
func FuzzParseDeadLetters(f *testing.F) {
	good, _ := json.Marshal(DeadLetter{Study: "1.2.3", Error: "no frontal view", Time: time.Unix(0, 0).UTC()})
	for _, s := range []string{string(good) + "\n", "not json\n" + string(good), `{"study":"../x"}`, `{"study":"1.2","error":"a` + strings.Repeat("\\n", 3000) + `"}`,
		strings.Repeat("x", maxDeadLetterLine+10) + "\n" + string(good), "\n\n", `{"study":1}`, "{\"study\":\"1.2\"}\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		skipped := 0
		dead, err := parseDeadLetters(bytes.NewReader(b), func(int, string) { skipped++ })
		if err != nil {
			t.Fatal(err)
		}
		lines := 0
		for _, l := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines++
			}
		}
		if len(dead) > lines || skipped > lines {
			t.Fatalf("%d entries and %d skipped of %d lines", len(dead), skipped, lines)
		}
		for k, d := range dead {
			if k != d.Study || !validUID(d.Study) || len(d.Error) > maxDeadLetterError+len("…") || strings.ContainsAny(d.Error, "\r\n") {
				t.Fatalf("entry %q: %+v", k, d)
			}
		}
	})
}

// FuzzParseJournal: any journal reads, never panics; each entry kept has
// valid UIDs and a message that parses, whose control ID is the entry's.
func FuzzParseJournal(f *testing.F) {
	msg := "MSH|^~\\&|RADGEN||||20240102||ORU^R01^ORU_R01|abc|P|2.5.1\rPID|||P1\r"
	good, _ := json.Marshal(&pending{Study: "1.2.3", Series: "2.25.1", SR: "2.25.2", ControlID: "abc", Message: msg, Time: time.Unix(0, 0).UTC()})
	for _, s := range []string{string(good) + "\n", "{broken\n" + string(good), strings.Replace(string(good), "abc", "xyz", 1),
		strings.Replace(string(good), "1.2.3", "../etc", 1), `{"message":"` + strings.Repeat("a", 100) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := parseJournal(bytes.NewReader(b), func(int, string) {})
		if err != nil {
			t.Fatal(err)
		}
		for k, p := range entries {
			if k != p.Study || p.check() != "" {
				t.Fatalf("entry %q: %+v", k, p)
			}
		}
	})
}

// TestReadLines: lines past the line bound or the file bound are
// reported skipped, the others read whole.
func TestReadLines(t *testing.T) {
	in := "a\n" + strings.Repeat("b", 20) + "\nc\n" + strings.Repeat("d", 30) + "\ne"
	var got []string
	var skipped []int
	readLines(strings.NewReader(in), 1<<10, 8, func(n int, b []byte) { got = append(got, strings.TrimSpace(string(b))) }, func(n int, why string) { skipped = append(skipped, n) })
	if strings.Join(got, ",") != "a,c,e" || len(skipped) != 2 || skipped[0] != 2 || skipped[1] != 4 {
		t.Errorf("lines %q, skipped %v", got, skipped)
	}
	got, skipped = nil, nil
	readLines(strings.NewReader("a\nb\nccc\ndd\n"), 5, 8, func(n int, b []byte) { got = append(got, strings.TrimSpace(string(b))) }, func(n int, why string) { skipped = append(skipped, n) })
	if strings.Join(got, ",") != "a,b" || len(skipped) != 1 || skipped[0] != 3 {
		t.Errorf("bounded file: lines %q, skipped %v", got, skipped)
	}
}
