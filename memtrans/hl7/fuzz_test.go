package hl7

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// FuzzParseMessage: any bytes parse or fail with ErrMalformed, never
// panic; an ACK built for what parses parses as an ACK of it.
func FuzzParseMessage(f *testing.F) {
	f.Add([]byte("MSH|^~\\&|A|B|C|D|20240101||ORU^R01|X1|P|2.5.1\rPID|1||7\rOBX|1|TX|c||text\r"))
	f.Add([]byte("MSH|^~\\&|||||||ACK|1|P|2.5\rMSA|AE|X1|bad\rERR||||||||why\r"))
	f.Add([]byte("MSH#"))
	f.Add([]byte("MSH|\n\nPID"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMessage(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatal(err)
			}
			return
		}
		m.Field("MSH", 10)
		m.Component(m.Field("MSH", 9), 2)
		ack, err := NewACK(b, "AA", "ok", time.Unix(0, 0).UTC())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseAck(ack); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatal(err)
		}
	})
}

// FuzzReadFrame: any stream gives frames within the bound or an error,
// never a panic; a frame written by WriteFrame reads back.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	WriteFrame(&buf, []byte("MSH|^~\\&|x"))
	f.Add(buf.Bytes())
	f.Add([]byte("\r\n\x0babc\x1c\r\x0b"))
	f.Add([]byte("\x0b\x0b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			msg, err := ReadFrame(r, 64)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) {
					t.Fatal(err)
				}
				return
			}
			if len(msg) > 64 {
				t.Fatalf("frame of %d bytes", len(msg))
			}
			var out bytes.Buffer
			if err := WriteFrame(&out, msg); err != nil {
				t.Fatal(err)
			}
			back, err := ReadFrame(bufio.NewReader(&out), 64)
			if err != nil || !bytes.Equal(back, msg) {
				t.Fatalf("round trip: %v", err)
			}
		}
	})
}
