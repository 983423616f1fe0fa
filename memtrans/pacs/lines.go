package pacs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// readLines calls line with each line of r (without its newline) within
// its first max bytes, and skipped with each line it leaves out: one
// longer than maxLine bytes, or the one that runs past max, where it
// stops. It keeps at most maxLine bytes at a time, and fails only when r
// does.
func readLines(r io.Reader, max int64, maxLine int, line func(n int, b []byte), skipped func(n int, why string)) error {
	br := bufio.NewReaderSize(r, maxLine+1)
	var used int64
	for n := 1; ; n++ {
		b, err := br.ReadSlice('\n')
		used += int64(len(b))
		long := false
		for errors.Is(err, bufio.ErrBufferFull) && used <= max { // skip to the line's end
			long = true
			b, err = br.ReadSlice('\n')
			used += int64(len(b))
		}
		switch {
		case used > max:
			skipped(n, fmt.Sprintf("the file goes on past %d bytes", max))
			return nil
		case long:
			skipped(n, fmt.Sprintf("longer than %d bytes", maxLine))
		case len(b) > 0:
			line(n, b)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// clean makes s one printable line of at most n bytes of valid UTF-8,
// marking a cut.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// validUID reports whether s is a DICOM UID: digits and single dots, at
// most 64 characters, neither starting nor ending with a dot.
func validUID(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	return strings.Trim(s, "0123456789.") == ""
}
