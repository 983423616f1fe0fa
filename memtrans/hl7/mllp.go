package hl7

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// MLLP framing bytes (HL7 v2 Implementation Guide, Appendix C).
const (
	startBlock = 0x0b
	endBlock   = 0x1c
	carriage   = 0x0d
)

// WriteFrame writes msg as one MLLP frame.
func WriteFrame(w io.Writer, msg []byte) error {
	if bytes.IndexByte(msg, startBlock) >= 0 || bytes.IndexByte(msg, endBlock) >= 0 {
		return fmt.Errorf("%w: the message holds an MLLP framing byte", ErrInput)
	}
	b := make([]byte, 0, len(msg)+3)
	b = append(b, startBlock)
	b = append(b, msg...)
	b = append(b, endBlock, carriage)
	_, err := w.Write(b)
	return err
}

// ReadFrame reads one MLLP frame and returns the message inside, of at
// most max bytes. White space before the start byte is skipped (some
// senders end frames with an extra newline); anything else there, a
// frame longer than max, or a stream ending inside a frame is
// ErrMalformed (io.EOF when the stream ends between frames).
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			return nil, err
		}
		if c == startBlock {
			break
		}
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			return nil, fmt.Errorf("%w: byte 0x%02x before the frame's start", ErrMalformed, c)
		}
	}
	var msg []byte
	for {
		c, err := r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("%w: frame broken off: %w", ErrMalformed, err)
		}
		if c == endBlock {
			c2, err := r.ReadByte()
			if err != nil || c2 != carriage {
				return nil, fmt.Errorf("%w: end byte not followed by CR", ErrMalformed)
			}
			return msg, nil
		}
		if c == startBlock {
			return nil, fmt.Errorf("%w: start byte inside a frame", ErrMalformed)
		}
		if len(msg) == max {
			return nil, fmt.Errorf("%w: frame longer than %d bytes", ErrMalformed, max)
		}
		msg = append(msg, c)
	}
}

// Ack is a receiver's acknowledgement.
type Ack struct {
	Code      string // MSA-1: AA, AE, AR (original mode) or CA, CE, CR (enhanced)
	ControlID string // MSA-2: the control ID of the message acknowledged
	Text      string // MSA-3, or ERR's diagnostic, when given
	Raw       []byte
}

// NAKError is a negative acknowledgement: the receiver got the message
// and refused it. HL7 v2.5 §2.9 tells two kinds apart. AE (application
// error, original mode) and CE (commit error, enhanced mode) say the
// message's content is in error: sending it again cannot help. AR
// (application reject) and CR (commit reject) say it was rejected for
// reasons unrelated to its content — the receiving system down or in
// error, or the message's type, version or processing ID not accepted
// there — which may pass, so the message is worth sending again later:
// a NAKError of AR or CR wraps ErrRejected, and Temporary reports it.
type NAKError struct{ Ack *Ack }

// Error names the message refused, the code and the receiver's text.
func (e *NAKError) Error() string {
	s := fmt.Sprintf("hl7: message %s refused: %s", truncate(e.Ack.ControlID, 64), e.Ack.Code)
	if e.Ack.Text != "" {
		s += ": " + truncate(e.Ack.Text, 256)
	}
	return s
}

// Temporary reports whether the refusal may pass (AR or CR).
func (e *NAKError) Temporary() bool { return e.Ack.Code == "AR" || e.Ack.Code == "CR" }

// Unwrap returns ErrRejected for AR and CR, nil for AE and CE.
func (e *NAKError) Unwrap() error {
	if e.Temporary() {
		return ErrRejected
	}
	return nil
}

// Sender sends messages over MLLP to one receiver. The zero value of its
// optional fields is usable.
type Sender struct {
	Addr        string        // host:port of the receiver
	Timeout     time.Duration // for connecting and for the ACK; default 30 s
	MaxAckBytes int           // default 1 MiB
	Dialer      net.Dialer
}

// Send sends msg on a new connection and waits for its acknowledgement,
// all within Timeout. It returns the ACK when it accepts the message (AA
// or CA); a *NAKError when it refuses it (wrapping ErrRejected for AR and
// CR, which may pass); an error wrapping ErrUnavailable when no
// acknowledgement came (no connection, a broken one, the timeout); an
// error wrapping ErrMalformed when the answer is not an ACK of msg.
func (s *Sender) Send(ctx context.Context, msg []byte) (*Ack, error) {
	m, err := ParseMessage(msg)
	if err != nil {
		return nil, fmt.Errorf("%w: the message to send: %w", ErrInput, err)
	}
	want := m.Field("MSH", 10)
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := s.Dialer.DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: MLLP %s: %w", ErrUnavailable, s.Addr, err)
	}
	defer conn.Close()
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := WriteFrame(conn, msg); err != nil {
		if errors.Is(err, ErrInput) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: MLLP %s: sending: %w", ErrUnavailable, s.Addr, err)
	}
	max := s.MaxAckBytes
	if max <= 0 {
		max = 1 << 20
	}
	rec := &connReader{r: conn}
	raw, err := ReadFrame(bufio.NewReader(rec), max)
	if err != nil {
		if rec.err == nil { // what came is wrong, not cut short
			return nil, fmt.Errorf("hl7: MLLP %s: the answer: %w", s.Addr, err)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return nil, fmt.Errorf("%w: MLLP %s: no acknowledgement of %s: %w", ErrUnavailable, s.Addr, want, err)
	}
	ack, err := ParseAck(raw)
	if err != nil {
		return nil, fmt.Errorf("hl7: MLLP %s: %w", s.Addr, err)
	}
	if ack.ControlID != want {
		return nil, fmt.Errorf("%w: MLLP %s: acknowledgement of %q, sent %q", ErrMalformed, s.Addr, ack.ControlID, want)
	}
	switch ack.Code {
	case "AA", "CA":
		return ack, nil
	}
	return ack, &NAKError{Ack: ack}
}

// connReader keeps the first error of its reader (io.EOF included): a
// frame that failed with one was cut short, not malformed.
type connReader struct {
	r   io.Reader
	err error
}

func (c *connReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// ParseAck reads an acknowledgement message (its MSA segment).
func ParseAck(b []byte) (*Ack, error) {
	m, err := ParseMessage(b)
	if err != nil {
		return nil, err
	}
	ack := &Ack{Code: m.Field("MSA", 1), ControlID: m.Field("MSA", 2), Text: m.Field("MSA", 3), Raw: b}
	switch ack.Code {
	case "AA", "AE", "AR", "CA", "CE", "CR":
	default:
		return nil, fmt.Errorf("%w: not an acknowledgement (MSA-1 %q)", ErrMalformed, truncate(ack.Code, 8))
	}
	if ack.Text == "" {
		ack.Text = m.Field("ERR", 8) // ERR-8 user message (v2.5)
	}
	return ack, nil
}

// NewACK returns the acknowledgement of msg with the given code (AA, AE,
// AR) and text: an MSH answering msg's and an MSA naming its control ID.
func NewACK(msg []byte, code, text string, t time.Time) ([]byte, error) {
	m, err := ParseMessage(msg)
	if err != nil {
		return nil, err
	}
	switch code {
	case "AA", "AE", "AR", "CA", "CE", "CR":
	default:
		return nil, fmt.Errorf("%w: acknowledgement code %q", ErrInput, code)
	}
	id := m.Field("MSH", 10)
	trigger := m.Component(m.Field("MSH", 9), 2)
	segs := []string{
		segment("MSH", map[int]string{2: `^~\&`, 3: m.Field("MSH", 5), 4: m.Field("MSH", 6), 5: m.Field("MSH", 3), 6: m.Field("MSH", 4),
			7: t.Format("20060102150405-0700"), 9: "ACK^" + trigger + "^ACK", 10: "ACK" + id[:min(len(id), 17)], 11: m.Field("MSH", 11), 12: m.Field("MSH", 12)}),
		segment("MSA", map[int]string{1: code, 2: id, 3: Escape(text)}),
	}
	return []byte(strings.Join(segs, "\r") + "\r"), nil
}
