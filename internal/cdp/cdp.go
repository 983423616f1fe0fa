package cdp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Conn is a DevTools protocol connection to a browser. Commands to a page
// carry the session id Target.attachToTarget returned (flat mode). A Conn is
// safe for concurrent use.
type Conn struct {
	ws *wsConn

	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	subs    map[string][]chan json.RawMessage // session + "\x00" + method → subscribers
	err     error                             // set when the reader stops
	done    chan struct{}
}

// message is any message from the browser: a response (ID set) or an event.
type message struct {
	ID        int64           `json:"id"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	SessionID string          `json:"sessionId"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    string `json:"data"`
	} `json:"error"`
}

// Dial connects to a DevTools WebSocket URL.
func Dial(ctx context.Context, wsURL string) (*Conn, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	ws, err := dialWS(wsURL, timeout)
	if err != nil {
		return nil, err
	}
	c := &Conn{ws: ws, pending: map[int64]chan message{}, subs: map[string][]chan json.RawMessage{}, done: make(chan struct{})}
	go c.read()
	return c, nil
}

func (c *Conn) read() {
	defer close(c.done)
	for {
		b, err := c.ws.ReadMessage()
		if err != nil {
			c.mu.Lock()
			c.err = fmt.Errorf("cdp: connection closed: %w", err)
			for _, ch := range c.pending {
				close(ch)
			}
			c.pending = map[int64]chan message{}
			c.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		c.mu.Lock()
		if m.ID != 0 {
			if ch, ok := c.pending[m.ID]; ok {
				delete(c.pending, m.ID)
				ch <- m
			}
		} else {
			for _, ch := range c.subs[m.SessionID+"\x00"+m.Method] {
				select {
				case ch <- m.Params:
				default: // a slow subscriber loses events rather than blocking the reader
				}
			}
		}
		c.mu.Unlock()
	}
}

// Call sends a command and decodes its result into result (nil to discard).
func (c *Conn) Call(ctx context.Context, session, method string, params, result any) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.next++
	id := c.next
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if session != "" {
		req["sessionId"] = session
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := c.ws.WriteText(b); err != nil {
		return fmt.Errorf("cdp: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return c.err
		}
		if m.Error != nil {
			return fmt.Errorf("cdp: %s: %s (%d) %s", method, m.Error.Message, m.Error.Code, m.Error.Data)
		}
		if result != nil {
			return json.Unmarshal(m.Result, result)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("cdp: %s: %w", method, ctx.Err())
	}
}

// Subscribe returns a channel receiving the parameters of every event
// method of the session, and a function that ends the subscription.
// Subscribe before the command that causes the event.
func (c *Conn) Subscribe(session, method string) (<-chan json.RawMessage, func()) {
	ch := make(chan json.RawMessage, 64)
	key := session + "\x00" + method
	c.mu.Lock()
	c.subs[key] = append(c.subs[key], ch)
	c.mu.Unlock()
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		s := c.subs[key]
		for i, x := range s {
			if x == ch {
				c.subs[key] = append(s[:i], s[i+1:]...)
				break
			}
		}
	}
}

// Close closes the connection.
func (c *Conn) Close() error {
	err := c.ws.Close()
	<-c.done
	return err
}

// Page is a browser tab attached in flat mode.
type Page struct {
	c       *Conn
	Session string
}

// NewPage opens a blank tab of width×height CSS pixels and attaches to it.
func (c *Conn) NewPage(ctx context.Context, width, height int) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := c.Call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var a struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.Call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &a); err != nil {
		return nil, err
	}
	p := &Page{c: c, Session: a.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "DOM.enable"} {
		if err := p.Call(ctx, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := p.Call(ctx, "Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// Call sends a command to the page.
func (p *Page) Call(ctx context.Context, method string, params, result any) error {
	return p.c.Call(ctx, p.Session, method, params, result)
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	ev, stop := p.c.Subscribe(p.Session, "Page.loadEventFired")
	defer stop()
	var r struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.Call(ctx, "Page.navigate", map[string]any{"url": url}, &r); err != nil {
		return err
	}
	if r.ErrorText != "" {
		return fmt.Errorf("cdp: navigate %s: %s", url, r.ErrorText)
	}
	select {
	case <-ev:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cdp: waiting for %s to load: %w", url, ctx.Err())
	}
}

// Eval evaluates a JavaScript expression (awaiting a promise) and decodes
// its value into out (nil to discard). A thrown exception is an error.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.Call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("cdp: %s: %s %s", expr, e.Text, e.Exception.Description)
	}
	if out != nil && r.Result.Value != nil {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// WaitFor evaluates a boolean expression every 50 ms until it is true.
func (p *Page) WaitFor(ctx context.Context, expr string) error {
	for {
		var ok bool
		if err := p.Eval(ctx, expr, &ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cdp: waiting for %s: %w", expr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// SetFiles sets the files of the file input that selector finds, as if
// the user had chosen them; the page receives its input and change events.
func (p *Page) SetFiles(ctx context.Context, selector string, files []string) error {
	var doc struct {
		Root struct {
			NodeID int `json:"nodeId"`
		} `json:"root"`
	}
	if err := p.Call(ctx, "DOM.getDocument", map[string]any{"depth": 0}, &doc); err != nil {
		return err
	}
	var q struct {
		NodeID int `json:"nodeId"`
	}
	if err := p.Call(ctx, "DOM.querySelector", map[string]any{"nodeId": doc.Root.NodeID, "selector": selector}, &q); err != nil {
		return err
	}
	if q.NodeID == 0 {
		return fmt.Errorf("cdp: no element %s", selector)
	}
	return p.Call(ctx, "DOM.setFileInputFiles", map[string]any{"files": files, "nodeId": q.NodeID}, nil)
}

// Click moves the mouse over the centre of the element selector finds and
// clicks it with the left button, as a user would.
func (p *Page) Click(ctx context.Context, selector string) error {
	var pt struct{ X, Y float64 }
	b, _ := json.Marshal(selector)
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) throw new Error("no element"); e.scrollIntoView({block: "center"}); const r = e.getBoundingClientRect(); return {X: r.x + r.width / 2, Y: r.y + r.height / 2}; })()`, b)
	if err := p.Eval(ctx, expr, &pt); err != nil {
		return err
	}
	for _, ev := range []map[string]any{
		{"type": "mouseMoved", "x": pt.X, "y": pt.Y},
		{"type": "mousePressed", "x": pt.X, "y": pt.Y, "button": "left", "clickCount": 1},
		{"type": "mouseReleased", "x": pt.X, "y": pt.Y, "button": "left", "clickCount": 1},
	} {
		if err := p.Call(ctx, "Input.dispatchMouseEvent", ev, nil); err != nil {
			return err
		}
	}
	return nil
}

// Screenshot captures the whole page as PNG.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.Call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		return nil, fmt.Errorf("cdp: screenshot: %w", err)
	}
	if len(b) == 0 {
		return nil, errors.New("cdp: empty screenshot")
	}
	return b, nil
}
