// Package progress draws the terminal progress bars of radgen's example
// commands (the library itself reports progress through callbacks and never
// prints).
package progress

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Bar is a one-line progress bar redrawn in place, at most five times a
// second.
type Bar struct {
	w     io.Writer
	start time.Time
	last  time.Time
}

// New returns a bar drawing on w.
func New(w io.Writer) *Bar { return &Bar{w: w, start: time.Now()} }

// Set draws n of total with a message.
func (b *Bar) Set(n, total int, msg string) {
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

// Done ends the bar's line.
func (b *Bar) Done() { fmt.Fprintln(b.w) }
