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
	"time"
)

// Bounds of the dead-letter file.
const (
	maxDeadLetterFile  = 64 << 20 // read at start, and appended to
	maxDeadLetterLine  = 4 << 10  // one entry
	maxDeadLetterError = 1 << 10  // the error kept in an entry
)

// DeadLetter is a study the worker gave up on.
type DeadLetter struct {
	Study string    `json:"study"`
	Error string    `json:"error"`
	Time  time.Time `json:"time"`
}

// parseDeadLetters reads a dead-letter file: one JSON object a line. It
// keeps the entries whose study is a UID, and calls skipped with each
// line it leaves out (too long, not JSON, no study UID, past the file's
// bound).
func parseDeadLetters(r io.Reader, skipped func(n int, why string)) (map[string]DeadLetter, error) {
	out := map[string]DeadLetter{}
	err := readLines(r, maxDeadLetterFile, maxDeadLetterLine, func(n int, b []byte) {
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			return
		}
		var d DeadLetter
		if err := json.Unmarshal(b, &d); err != nil {
			skipped(n, "not a JSON object of a dead letter")
			return
		}
		if !validUID(d.Study) {
			skipped(n, "no StudyInstanceUID")
			return
		}
		d.Error = clean(d.Error, maxDeadLetterError)
		out[d.Study] = d
	}, skipped)
	return out, err
}

// readDeadLetters reads DeadLetterFile when it exists. Lines it cannot
// read are logged and skipped.
func (w *Worker) readDeadLetters() error {
	if w.cfg.DeadLetterFile == "" {
		return nil
	}
	f, err := os.Open(w.cfg.DeadLetterFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pacs: dead letters: %w", err)
	}
	defer f.Close()
	dead, err := parseDeadLetters(f, func(n int, why string) {
		w.log.LogAttrs(context.Background(), slog.LevelError, "pacs: dead-letter line skipped", slog.String("file", w.cfg.DeadLetterFile),
			slog.Int("line", n), slog.String("reason", why))
	})
	if err != nil {
		return fmt.Errorf("pacs: dead letters: %s: %w", w.cfg.DeadLetterFile, err)
	}
	w.dead = dead
	w.stats.DeadLetters = len(w.dead)
	return nil
}

// deadLetter records a failed study: in memory, and as one bounded line
// of DeadLetterFile. It removes the study's pending HL7 message, if any.
// Only a file that cannot be written is an error.
func (w *Worker) deadLetter(ctx context.Context, uid string, err error) error {
	w.mu.Lock()
	_, known := w.dead[uid]
	w.mu.Unlock()
	if known {
		return w.unjournal(uid)
	}
	d := DeadLetter{Study: clean(uid, 64), Error: clean(err.Error(), maxDeadLetterError), Time: w.cfg.Now().UTC()}
	w.log.LogAttrs(ctx, slog.LevelError, "pacs: study dead-lettered", slog.String("study", d.Study), slog.String("error", d.Error))
	if w.cfg.DeadLetterFile != "" {
		b, _ := json.Marshal(d) // one line: JSON escapes control characters
		if ferr := appendLine(w.cfg.DeadLetterFile, append(b, '\n'), maxDeadLetterFile); errors.Is(ferr, errFileFull) {
			w.log.LogAttrs(ctx, slog.LevelError, "pacs: the dead-letter file is full; the study is dead-lettered until the worker stops",
				slog.String("file", w.cfg.DeadLetterFile), slog.String("study", d.Study))
		} else if ferr != nil {
			return &studyError{fmt.Errorf("pacs: writing the dead letter of %s: %w", d.Study, ferr), true}
		}
	}
	w.mu.Lock()
	w.dead[uid] = d
	w.stats.DeadLetters = len(w.dead)
	w.mu.Unlock()
	return w.unjournal(uid)
}

// unjournal removes the pending HL7 message of a study, if any.
func (w *Worker) unjournal(uid string) error {
	if w.journalled(uid) == nil {
		return nil
	}
	if err := w.journal.remove(uid); err != nil {
		return err
	}
	w.setPending()
	return nil
}

var errFileFull = errors.New("file at its size bound")

// appendLine appends b to the file at path and syncs it, unless the file
// would grow past max bytes.
func appendLine(path string, b []byte, max int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && fi.Size()+int64(len(b)) > max {
		f.Close()
		return errFileFull
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
