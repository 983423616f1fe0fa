package hl7

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Errors of the package.
var (
	// ErrMalformed: bytes that are not an ER7 message or an MLLP frame.
	ErrMalformed = errors.New("hl7: malformed message")
	// ErrInput: input that cannot make a message.
	ErrInput = errors.New("hl7: bad input")
	// ErrUnavailable: the receiver could not be reached, the connection
	// broke or no acknowledgement came in time. The message may or may
	// not have arrived; sending it again is safe for a receiver that
	// drops repeated control IDs.
	ErrUnavailable = errors.New("hl7: receiver unavailable")
	// ErrRejected: the receiver answered AR or CR, rejecting the message
	// for reasons unrelated to its content (HL7 v2.5 §2.9); it may take it
	// later. Wrapped by a NAKError.
	ErrRejected = errors.New("hl7: message rejected by the receiver, not for its content")
)

// Bounds of ParseMessage.
const (
	maxSegments = 10000
	maxFields   = 1000
)

// Message is a parsed ER7 message: its segments, each a list of fields.
// Fields keep their components and escapes as sent.
type Message struct {
	Segments [][]string
	// Field separator and encoding characters (MSH-1, MSH-2).
	FieldSep byte
	Encoding string
}

// ParseMessage reads an ER7 message: segments separated by CR (LF and
// CRLF are accepted too), the first an MSH whose fourth byte is the field
// separator. It refuses more than 10000 segments or 1000 fields in one.
func ParseMessage(b []byte) (*Message, error) {
	b = bytes.TrimRight(b, "\r\n")
	if len(b) < 8 || string(b[:3]) != "MSH" {
		return nil, fmt.Errorf("%w: does not start with MSH", ErrMalformed)
	}
	sep := b[3]
	if sep == '\r' || sep == '\n' || sep < 0x20 || sep > 0x7e || bytes.IndexByte([]byte("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"), sep) >= 0 {
		return nil, fmt.Errorf("%w: field separator %q", ErrMalformed, sep)
	}
	m := &Message{FieldSep: sep}
	text := strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\r"), "\n", "\r")
	lines := strings.Split(text, "\r")
	if len(lines) > maxSegments {
		return nil, fmt.Errorf("%w: more than %d segments", ErrMalformed, maxSegments)
	}
	for i, line := range lines {
		if line == "" {
			continue
		}
		if strings.Count(line, string(sep)) >= maxFields {
			return nil, fmt.Errorf("%w: segment %d has more than %d fields", ErrMalformed, i+1, maxFields)
		}
		f := strings.Split(line, string(sep))
		if len(f[0]) != 3 {
			return nil, fmt.Errorf("%w: segment %d: name %q", ErrMalformed, i+1, truncate(f[0], 16))
		}
		if f[0] == "MSH" {
			// MSH-1 is the separator itself: field n of MSH is f[n-1].
			f = append([]string{"MSH", string(sep)}, f[1:]...)
		}
		m.Segments = append(m.Segments, f)
	}
	if len(m.Segments[0]) < 3 || len(m.Segments[0][2]) < 1 {
		return nil, fmt.Errorf("%w: MSH has no encoding characters", ErrMalformed)
	}
	m.Encoding = m.Segments[0][2]
	return m, nil
}

// Field returns field n (1-based, as the standard numbers them) of the
// first segment named seg, or "".
func (m *Message) Field(seg string, n int) string {
	for _, s := range m.Segments {
		if s[0] == seg {
			if n >= 1 && n < len(s) {
				return s[n]
			}
			return ""
		}
	}
	return ""
}

// Component returns component c (1-based) of a field.
func (m *Message) Component(field string, c int) string {
	cs := byte('^')
	if len(m.Encoding) > 0 {
		cs = m.Encoding[0]
	}
	parts := strings.Split(field, string(cs))
	if c >= 1 && c <= len(parts) {
		return parts[c-1]
	}
	return ""
}

// Escape escapes text for an ER7 field with the default encoding
// characters (^~\&): \F\ \S\ \T\ \R\ \E\; control characters become
// spaces.
func Escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '|':
			b.WriteString(`\F\`)
		case '^':
			b.WriteString(`\S\`)
		case '&':
			b.WriteString(`\T\`)
		case '~':
			b.WriteString(`\R\`)
		case '\\':
			b.WriteString(`\E\`)
		default:
			if r < 0x20 || r == 0x7f {
				r = ' '
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// segment builds one segment from fields numbered as the standard numbers
// them (fields[1] is field 1); for MSH, fields[1] and fields[2] are the
// separator and the encoding characters.
func segment(name string, fields map[int]string) string {
	n := 0
	for k := range fields {
		n = max(n, k)
	}
	parts := make([]string, n+1)
	parts[0] = name
	for k, v := range fields {
		parts[k] = v
	}
	if name == "MSH" {
		return strings.TrimRight("MSH|"+strings.Join(parts[2:], "|"), "|")
	}
	return strings.TrimRight(strings.Join(parts, "|"), "|")
}
