package cdp

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// maxMessage bounds a received message (screenshots are a few megabytes of
// base64).
const maxMessage = 256 << 20

// WebSocket opcodes (RFC 6455 §5.2).
const (
	opContinuation = 0x0
	opText         = 0x1
	opBinary       = 0x2
	opClose        = 0x8
	opPing         = 0x9
	opPong         = 0xa
)

// wsConn is the client end of a WebSocket: one reader goroutine, writers
// serialised by a mutex.
type wsConn struct {
	c  net.Conn
	r  *bufio.Reader
	mu sync.Mutex // guards writes
}

// acceptKey is the Sec-WebSocket-Accept value for a key (RFC 6455 §4.2.2).
func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// dialWS opens a ws:// URL (no TLS: the browser listens on loopback).
func dialWS(rawURL string, timeout time.Duration) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "ws" {
		return nil, fmt.Errorf("cdp: not a ws:// URL: %q", rawURL)
	}
	c, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return nil, fmt.Errorf("cdp: %w", err)
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	c.SetDeadline(time.Now().Add(timeout))
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("cdp: handshake: %w", err)
	}
	r := bufio.NewReaderSize(c, 64<<10)
	resp, err := http.ReadResponse(r, &http.Request{Method: http.MethodGet})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("cdp: handshake: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") ||
		resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key) {
		c.Close()
		return nil, fmt.Errorf("cdp: handshake refused: %s", resp.Status)
	}
	c.SetDeadline(time.Time{})
	return &wsConn{c: c, r: r}, nil
}

// writeFrame sends one final frame, masked as a client must (§5.3).
func (w *wsConn) writeFrame(op byte, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	hdr := make([]byte, 2, 14)
	hdr[0] = 0x80 | op
	switch n := len(payload); {
	case n < 126:
		hdr[1] = 0x80 | byte(n)
	case n <= 0xffff:
		hdr[1] = 0x80 | 126
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(n))
	default:
		hdr[1] = 0x80 | 127
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	buf := make([]byte, len(hdr)+len(payload))
	copy(buf, hdr)
	for i, b := range payload {
		buf[len(hdr)+i] = b ^ mask[i&3]
	}
	_, err := w.c.Write(buf)
	return err
}

// WriteText sends a text message.
func (w *wsConn) WriteText(msg []byte) error { return w.writeFrame(opText, msg) }

// ReadMessage returns the next data message, reassembling fragments and
// answering pings; it returns io.EOF after a close frame.
func (w *wsConn) ReadMessage() ([]byte, error) {
	var msg []byte
	started := false
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.r, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0f
		if h[0]&0x70 != 0 {
			return nil, errors.New("cdp: websocket frame with reserved bits")
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.r, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.r, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		var mask [4]byte
		masked := h[1]&0x80 != 0
		if masked { // servers do not mask, but tolerate it
			if _, err := io.ReadFull(w.r, mask[:]); err != nil {
				return nil, err
			}
		}
		if op >= opClose && (n > 125 || !fin) {
			return nil, errors.New("cdp: malformed websocket control frame")
		}
		if n > maxMessage || uint64(len(msg))+n > maxMessage {
			return nil, fmt.Errorf("cdp: websocket message over %d bytes", maxMessage)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(w.r, payload); err != nil {
			return nil, err
		}
		if masked {
			for i := range payload {
				payload[i] ^= mask[i&3]
			}
		}
		switch op {
		case opPing:
			if err := w.writeFrame(opPong, payload); err != nil {
				return nil, err
			}
			continue
		case opPong:
			continue
		case opClose:
			w.writeFrame(opClose, payload)
			return nil, io.EOF
		case opText, opBinary:
			if started {
				return nil, errors.New("cdp: websocket data frame inside a fragmented message")
			}
			started = true
			msg = payload
		case opContinuation:
			if !started {
				return nil, errors.New("cdp: websocket continuation without a message")
			}
			msg = append(msg, payload...)
		default:
			return nil, fmt.Errorf("cdp: websocket opcode %#x", op)
		}
		if fin {
			return msg, nil
		}
	}
}

// Close sends a close frame and closes the connection.
func (w *wsConn) Close() error {
	w.writeFrame(opClose, []byte{0x03, 0xe8}) // 1000: normal closure
	return w.c.Close()
}
