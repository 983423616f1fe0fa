package pacs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans/hl7"
)

// Bounds of the HL7 journal.
const (
	maxJournalMessage = 128 << 10 // one ORU^R01
	maxJournalLine    = 1 << 20   // one entry: the message JSON-escaped and its UIDs
	maxJournalFile    = 64 << 20  // the file read at start
)

// pending is an ORU^R01 whose SR is stored, or about to be, and that its
// receiver has not acknowledged: one entry of the journal.
type pending struct {
	Study     string    `json:"study"`
	Series    string    `json:"series"` // the SR's series
	SR        string    `json:"sr"`     // the SR's SOP Instance UID
	ControlID string    `json:"control_id"`
	Message   string    `json:"message"` // the ORU^R01, ER7
	Time      time.Time `json:"time"`

	// In memory only.
	stored    bool      // the SR is known to be in the PACS
	failures  int       // rejections (AR, CR) so far
	firstFail time.Time // of the first rejection
	next      time.Time // no attempt before then
}

// journal keeps the pending ORU^R01 messages in a file, rewritten whole
// (a temporary file renamed over it) at each change, so that a crash
// leaves the old or the new content, never a mix.
type journal struct {
	path    string
	entries map[string]*pending // by study
}

// parseJournal reads journal entries, one JSON object a line, and calls
// skipped with each line it leaves out.
func parseJournal(r io.Reader, skipped func(n int, why string)) (map[string]*pending, error) {
	out := map[string]*pending{}
	err := readLines(r, maxJournalFile, maxJournalLine, func(n int, b []byte) {
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			return
		}
		var p pending
		if err := json.Unmarshal(b, &p); err != nil {
			skipped(n, "not a JSON object of a pending HL7 message")
			return
		}
		if why := p.check(); why != "" {
			skipped(n, why)
			return
		}
		out[p.Study] = &p
	}, skipped)
	return out, err
}

// check returns why p is not a usable entry, or "".
func (p *pending) check() string {
	if !validUID(p.Study) || !validUID(p.Series) || !validUID(p.SR) {
		return "a study, series or SR UID that is not one"
	}
	if len(p.Message) > maxJournalMessage {
		return fmt.Sprintf("a message longer than %d bytes", maxJournalMessage)
	}
	m, err := hl7.ParseMessage([]byte(p.Message))
	if err != nil {
		return "a message that does not parse: " + clean(err.Error(), 200)
	}
	if id := m.Field("MSH", 10); id == "" || id != p.ControlID {
		return "a message whose control ID is not the entry's"
	}
	return ""
}

// openJournal reads the journal at path (none yet is an empty one), logs
// and drops the lines it cannot read, and writes it back without them.
func openJournal(path string, log *slog.Logger) (*journal, error) {
	j := &journal{path: path, entries: map[string]*pending{}}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pacs: HL7 journal: %w", err)
	}
	defer f.Close()
	bad := 0
	j.entries, err = parseJournal(f, func(n int, why string) {
		bad++
		log.LogAttrs(context.Background(), slog.LevelError, "pacs: HL7 journal line skipped: its message is lost", slog.String("file", path),
			slog.Int("line", n), slog.String("reason", why))
	})
	if err != nil {
		return nil, fmt.Errorf("pacs: HL7 journal: %s: %w", path, err)
	}
	if bad > 0 {
		if err := j.save(); err != nil {
			return nil, err
		}
	}
	return j, nil
}

func (j *journal) get(study string) *pending { return j.entries[study] }

func (j *journal) len() int { return len(j.entries) }

// list returns the entries, oldest first.
func (j *journal) list() []*pending {
	out := make([]*pending, 0, len(j.entries))
	for _, p := range j.entries {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *pending) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Study, b.Study)
	})
	return out
}

// put adds or replaces the entry of p's study, on disk before it returns.
func (j *journal) put(p *pending) error {
	old, had := j.entries[p.Study]
	j.entries[p.Study] = p
	if err := j.save(); err != nil {
		if had {
			j.entries[p.Study] = old
		} else {
			delete(j.entries, p.Study)
		}
		return err
	}
	return nil
}

// remove drops the entry of a study, on disk before it returns.
func (j *journal) remove(study string) error {
	p, ok := j.entries[study]
	if !ok {
		return nil
	}
	delete(j.entries, study)
	if err := j.save(); err != nil {
		j.entries[study] = p
		return err
	}
	return nil
}

// save writes the journal whole: a temporary file in its folder, synced,
// renamed over it, the folder synced. Its failure is fatal to the worker
// (studyError): without the journal an ORU^R01 could be lost in a crash.
func (j *journal) save() error {
	var buf bytes.Buffer
	for _, p := range j.list() {
		b, err := json.Marshal(p)
		if err != nil {
			return &studyError{fmt.Errorf("pacs: HL7 journal: %w", err), true}
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	dir := filepath.Dir(j.path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(j.path)+".tmp-*")
	if err != nil {
		return &studyError{fmt.Errorf("pacs: HL7 journal: %w", err), true}
	}
	_, err = f.Write(buf.Bytes())
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), j.path)
	}
	if err != nil {
		os.Remove(f.Name())
		return &studyError{fmt.Errorf("pacs: HL7 journal %s: %w", j.path, err), true}
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename itself; not every file system can
		d.Close()
	}
	return nil
}
