package hl7_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/memtrans/hl7"
)

// hostile is an MLLP listener on loopback that answers each connection
// with answer (after reading one frame), and is closed with the test.
func hostile(t *testing.T, answer func(c net.Conn, msg []byte)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				go func() { <-done; c.Close() }()
				msg, err := hl7.ReadFrame(bufio.NewReader(c), 1<<20)
				if err != nil {
					return
				}
				answer(c, msg)
			}()
		}
	}()
	t.Cleanup(func() { close(done); ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

// TestHostileReceivers: each acknowledgement code is acted on as HL7
// v2.5 §2.9 says — AA and CA accept; AR and CR reject the message for
// reasons unrelated to its content (ErrRejected, Temporary: send it
// later); AE and CE refuse its content (final) — and a receiver that
// misbehaves fails the send within the Timeout with a classified error:
// an ACK of another message, a frame that is not an ACK, bytes before the
// frame or a frame past MaxAckBytes are ErrMalformed; a connection closed
// without an answer, an ACK trickled slower than the Timeout, or none at
// all are ErrUnavailable.
func TestHostileReceivers(t *testing.T) {
	ctx := context.Background()
	msg := newORU(t)
	ack := func(code string) func(net.Conn, []byte) {
		return func(c net.Conn, m []byte) {
			a, _ := hl7.NewACK(m, code, "said "+code, testTime)
			hl7.WriteFrame(c, a)
		}
	}
	other := func(c net.Conn, m []byte) {
		a, _ := hl7.NewACK([]byte(strings.Replace(string(m), hl7.ControlID("1.2.826.0.1.3680043.8.498.7", testModel), "SOMEOTHER", 1)), "AA", "", testTime)
		hl7.WriteFrame(c, a)
	}
	for _, c := range []struct {
		name     string
		answer   func(net.Conn, []byte)
		want     error // nil: accepted
		rejected bool  // a *NAKError that may pass
		nak      bool
	}{
		{"AA", ack("AA"), nil, false, false},
		{"CA", ack("CA"), nil, false, false},
		{"AR", ack("AR"), hl7.ErrRejected, true, true},
		{"CR", ack("CR"), hl7.ErrRejected, true, true},
		{"AE", ack("AE"), nil, false, true},
		{"CE", ack("CE"), nil, false, true},
		{"ACK of another message", other, hl7.ErrMalformed, false, false},
		{"not an ACK", func(c net.Conn, m []byte) { hl7.WriteFrame(c, m) }, hl7.ErrMalformed, false, false},
		{"bytes before the frame", func(c net.Conn, m []byte) { c.Write([]byte("HTTP/1.1 400 Bad Request\r\n")) }, hl7.ErrMalformed, false, false},
		{"100 MB ACK", func(c net.Conn, m []byte) {
			c.Write([]byte{0x0b})
			junk := []byte(strings.Repeat("A", 1<<16))
			for range 1600 {
				if _, err := c.Write(junk); err != nil {
					return
				}
			}
		}, hl7.ErrMalformed, false, false},
		{"closed", func(c net.Conn, m []byte) {}, hl7.ErrUnavailable, false, false},
		{"half a frame", func(c net.Conn, m []byte) { c.Write([]byte("\x0bMSH|^~\\&|")) }, hl7.ErrUnavailable, false, false},
		{"trickled", func(c net.Conn, m []byte) {
			a, _ := hl7.NewACK(m, "AA", "", testTime)
			c.Write([]byte{0x0b})
			for _, b := range a {
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}, hl7.ErrUnavailable, false, false},
		{"silent", func(c net.Conn, m []byte) { c.Read(make([]byte, 1)) }, hl7.ErrUnavailable, false, false},
	} {
		addr := hostile(t, c.answer)
		got, err := (&hl7.Sender{Addr: addr, Timeout: 300 * time.Millisecond}).Send(ctx, msg)
		var ne *hl7.NAKError
		isNAK := errors.As(err, &ne)
		switch {
		case c.want == nil && !c.nak:
			if err != nil || got == nil || got.Code != c.name {
				t.Errorf("%s: %v %+v", c.name, err, got)
			}
		case c.nak:
			if !isNAK || ne.Temporary() != c.rejected || errors.Is(err, hl7.ErrRejected) != c.rejected || errors.Is(err, hl7.ErrUnavailable) ||
				ne.Ack.Code != c.name || ne.Ack.Text != "said "+c.name {
				t.Errorf("%s: %v", c.name, err)
			}
		default:
			if !errors.Is(err, c.want) || isNAK {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
			}
		}
	}
}
