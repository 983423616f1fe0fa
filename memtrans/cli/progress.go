package cli

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// bar is a one-line progress bar redrawn in place, at most five times a
// second. The library reports progress through callbacks
// (memtrans.WithProgress) and never prints; drawing it is the command's.
type bar struct {
	w     io.Writer
	start time.Time
	last  time.Time
}

// newBar returns a bar drawing on w.
func newBar(w io.Writer) *bar { return &bar{w: w, start: time.Now()} }

// set draws n of total with a message.
func (b *bar) set(n, total int, msg string) {
	if n != total && time.Since(b.last) < 200*time.Millisecond {
		return
	}
	b.last = time.Now()
	const width = 30
	total = max(total, 1)
	n = max(0, min(n, total))
	fill := n * width / total
	fmt.Fprintf(b.w, "\r[%s%s] %3d%% %s %s ", strings.Repeat("#", fill), strings.Repeat(".", width-fill),
		n*100/total, msg, time.Since(b.start).Round(time.Second))
}

// done ends the bar's line.
func (b *bar) done() { fmt.Fprintln(b.w) }
