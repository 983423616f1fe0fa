package cdp

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// serverFrame writes an unmasked server frame.
func serverFrame(w io.Writer, fin bool, op byte, p []byte) {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	hdr := []byte{b0}
	switch n := len(p); {
	case n < 126:
		hdr = append(hdr, byte(n))
	case n <= 0xffff:
		hdr = binary.BigEndian.AppendUint16(append(hdr, 126), uint16(n))
	default:
		hdr = binary.BigEndian.AppendUint64(append(hdr, 127), uint64(n))
	}
	w.Write(append(hdr, p...))
}

// readClientFrame reads one client frame, checks that it is masked and
// returns its opcode and unmasked payload.
func readClientFrame(t *testing.T, r *bufio.Reader) (byte, []byte) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		t.Error(err)
		return 0, nil
	}
	if h[1]&0x80 == 0 {
		t.Error("client frame not masked")
	}
	n := uint64(h[1] & 0x7f)
	if n == 126 {
		var b [2]byte
		io.ReadFull(r, b[:])
		n = uint64(binary.BigEndian.Uint16(b[:]))
	} else if n == 127 {
		var b [8]byte
		io.ReadFull(r, b[:])
		n = binary.BigEndian.Uint64(b[:])
	}
	var mask [4]byte
	io.ReadFull(r, mask[:])
	p := make([]byte, n)
	io.ReadFull(r, p)
	for i := range p {
		p[i] ^= mask[i&3]
	}
	return h[0] & 0x0f, p
}

// TestWebSocket runs the client against a server written to RFC 6455: the
// handshake's accept key, masked client frames of all three length forms,
// a fragmented server message with a ping in between, and the close.
func TestWebSocket(t *testing.T) {
	if got := acceptKey("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" { // RFC 6455 §1.3
		t.Fatalf("accept key %q", got)
	}
	sizes := []int{5, 300, 70000}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" || r.Header.Get("Sec-WebSocket-Version") != "13" {
			t.Error("bad upgrade request")
		}
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + acceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n")
		rw.Flush()
		for _, n := range sizes {
			op, p := readClientFrame(t, rw.Reader)
			if op != opText || len(p) != n || !bytes.Equal(p, bytes.Repeat([]byte("a"), n)) {
				t.Errorf("frame of %d: op %d, %d bytes", n, op, len(p))
			}
			serverFrame(c, false, opText, p[:n/2])
			serverFrame(c, true, opPing, []byte("hi"))
			if op, p := readClientFrame(t, rw.Reader); op != opPong || string(p) != "hi" {
				t.Errorf("pong: op %d %q", op, p)
			}
			serverFrame(c, true, opContinuation, p[n/2:])
		}
		serverFrame(c, true, opClose, []byte{0x03, 0xe8})
		readClientFrame(t, rw.Reader)
	}))
	defer srv.Close()
	ws, err := dialWS("ws"+strings.TrimPrefix(srv.URL, "http")+"/devtools", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.c.Close()
	for _, n := range sizes {
		msg := bytes.Repeat([]byte("a"), n)
		if err := ws.WriteText(msg); err != nil {
			t.Fatal(err)
		}
		got, err := ws.ReadMessage()
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo of %d bytes: %d bytes, %v", n, len(got), err)
		}
	}
	if _, err := ws.ReadMessage(); err != io.EOF {
		t.Errorf("after close: %v", err)
	}
}

func TestHandshakeRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := dialWS("ws"+strings.TrimPrefix(srv.URL, "http")+"/x", 5*time.Second); err == nil {
		t.Error("a 404 was taken for a WebSocket")
	}
	if _, err := dialWS("http://"+srv.Listener.Addr().String(), time.Second); err == nil {
		t.Error("an http URL was dialled")
	}
}
