package serve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/orthanctest"
)

// TestSTOWOversubscribed: many STOW-RS pushes at once, each a large part
// of the memory budget, never deadlock the budget. The server waits for
// memory far longer than the test lets the clients wait (the upload and
// request deadlines are minutes), so a budget whose requests each hold a
// part of it while waiting for the rest leaves the clients unanswered.
// Every push is answered 200 or 429 (with Retry-After), none 408 or 504;
// at least one is served, and the budget is whole again afterwards.
//
// "large uploads": each push carries a 6 MB film besides its two views,
// and a few pushes fill the budget while their bodies arrive. "large
// decodes": each push is two 1024² films, whose decoding needs 17 MB a
// view, and the uploads alone fill the budget before any decoding.
func TestSTOWOversubscribed(t *testing.T) {
	for _, c := range []struct {
		name          string
		pushes        int
		budget        int64
		side, padding int // the views' side; the rows of a 2048-column AP film sent besides them, 0 for none
	}{
		{"large uploads", 24, 32 << 20, 64, 3072},
		{"large decodes", 16, 48 << 20, 1024, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			const study = "1.2.826.0.1.3680043.8.498.2701"
			h := newHandler(t, WithMemoryBudget(c.budget), WithUploadTimeout(2*time.Minute), WithTimeout(4*time.Minute), WithQueue(c.pushes))
			srv := server(t, h)
			parts := []instPart{
				dicomPart(orthanctest.Film{Study: study, Series: study + ".1", SOP: study + ".1.1", ViewPosition: "PA", Rows: c.side, Columns: c.side}.Bytes()),
				dicomPart(orthanctest.Film{Study: study, Series: study + ".2", SOP: study + ".2.1", ViewPosition: "LL", Rows: c.side, Columns: c.side}.Bytes()),
			}
			if c.padding > 0 { // an image of the study that is not chosen as a view
				parts = append(parts, dicomPart(orthanctest.Film{Study: study, Series: study + ".3", SOP: study + ".3.1", ViewPosition: "AP", Rows: c.padding, Columns: 2048}.Bytes()))
			}
			body, ct := stowBody(t, parts...)
			if int64(body.Len()) > c.budget/3 && c.padding > 0 || int64(body.Len()) > c.budget {
				t.Fatalf("a push of %d bytes", body.Len())
			}

			// The clients wait one minute at most; the server's own waits
			// would last minutes.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			codes := make([]int, c.pushes)
			var wg sync.WaitGroup
			for i := range codes {
				wg.Go(func() {
					req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/dicomweb/studies?max_length=6", bytes.NewReader(body.Bytes()))
					if err != nil {
						t.Error(err)
						return
					}
					req.Header.Set("Content-Type", ct)
					resp, err := srv.Client().Do(req)
					if err != nil {
						t.Errorf("push %d: %v", i, err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					codes[i] = resp.StatusCode
					switch resp.StatusCode {
					case http.StatusOK:
					case http.StatusTooManyRequests:
						if resp.Header.Get("Retry-After") == "" || decodeError(t, b).Error.Code != CodeOverloaded {
							t.Errorf("push %d: 429 without Retry-After or overloaded: %s", i, b)
						}
					default:
						t.Errorf("push %d: %d %s", i, resp.StatusCode, b)
					}
				})
			}
			wg.Wait()
			served := 0
			for _, code := range codes {
				if code == http.StatusOK {
					served++
				}
			}
			t.Logf("%d pushes of %d KiB, budget %d MiB: %d served, answers %v; reserved at most %d MiB",
				c.pushes, body.Len()>>10, c.budget>>20, served, codes, h.mem.peak.Load()>>20)
			if served == 0 {
				t.Error("no push was served")
			}
			if p := h.mem.peak.Load(); p > c.budget {
				t.Errorf("reserved %d bytes, over the budget of %d", p, c.budget)
			}
			waitFor(func() bool { return h.mem.used.Load() == 0 }) // decodings given up finish apart
			if n := h.m.admitted.Load(); n != 0 {
				t.Errorf("%d requests still admitted", n)
			}
		})
	}
}

// takeAsync runs r.take in the background; the result arrives on the
// channel.
func takeAsync(r *reservation, ctx context.Context, n int64) <-chan bool {
	c := make(chan bool, 1)
	go func() { c <- r.take(ctx, n) }()
	return c
}

// waiting waits until the budget has n waits.
func waiting(b *memBudget, n int) {
	waitFor(func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiters) == n
	})
}

// TestMemBudgetGivesWay: two requests each hold part of the budget and
// each waits for more than is free. The younger gives way at once (its
// wait fails), and once it has given back what it holds the older is
// served. A request whose need would not fit beside what it holds gives
// way alone.
func TestMemBudgetGivesWay(t *testing.T) {
	ctx := context.Background()
	b := newMemBudget(100)
	older, younger := b.newReservation(), b.newReservation()
	if !older.try(40) || !younger.try(40) {
		t.Fatal("the first 80 bytes of 100 did not fit")
	}
	if b.newReservation().try(30) {
		t.Fatal("30 bytes taken with 20 free")
	}
	got := takeAsync(older, ctx, 30) // the younger's 40 will come back
	waiting(b, 1)
	if younger.take(ctx, 30) {
		t.Fatal("the younger request was served 30 bytes with 20 free")
	}
	select {
	case ok := <-got:
		t.Fatalf("the older request's wait ended (%v) before the younger gave back its bytes", ok)
	default:
	}
	younger.release()
	if !<-got {
		t.Fatal("the older request was not served once the younger gave way")
	}
	if n := b.used.Load(); n != 70 || older.n != 70 {
		t.Errorf("%d bytes used, %d held by the older request; want 70", n, older.n)
	}
	if older.take(ctx, 40) {
		t.Error("40 bytes more served beside 70 of 100")
	}
	older.release()
	older.release() // idempotent
	if b.used.Load() != 0 || len(b.waiters) != 0 || b.peak.Load() != 80 {
		t.Errorf("after release: used %d, %d waiting, peak %d", b.used.Load(), len(b.waiters), b.peak.Load())
	}
}

// TestMemBudgetOrder: waits are served oldest request first, even where
// a younger one's bytes would fit; a hold apart (a decoding) is work that
// will end, so a request waiting beside it does not give way; a wait
// whose context ends takes nothing and lets the next be served; and more
// than the whole budget is refused at once.
func TestMemBudgetOrder(t *testing.T) {
	ctx := context.Background()
	b := newMemBudget(100)
	a, c := b.newReservation(), b.newReservation()
	if !a.try(50) || !a.takeApart(ctx, 40) {
		t.Fatal("90 bytes of 100 did not fit")
	}
	old := takeAsync(a, ctx, 30) // waits for the decoding's 40
	waiting(b, 1)
	young := takeAsync(c, ctx, 5) // fits, but a's wait is older
	waiting(b, 2)
	b.releaseApart(40)
	if !<-old || !<-young {
		t.Fatal("the waits were not served once the decoding ended")
	}
	if a.n != 80 || c.n != 5 {
		t.Errorf("held %d and %d", a.n, c.n)
	}

	// A wait whose context ends.
	cctx, cancel := context.WithCancel(ctx)
	gone := takeAsync(c, cctx, 50)
	waiting(b, 1)
	next := takeAsync(b.newReservation(), ctx, 10)
	waiting(b, 2)
	cancel()
	if <-gone {
		t.Error("a canceled wait was served")
	}
	if !<-next {
		t.Error("the wait behind a canceled one was not served")
	}
	if c.n != 5 {
		t.Errorf("the canceled wait took bytes: %d held", c.n)
	}
	if a.take(ctx, 101) || a.takeApart(ctx, 101) {
		t.Error("more than the budget was served")
	}
}

// rawPost sends a report request's headers (and no body) on a new
// connection and returns it.
func rawPost(t *testing.T, addr, path, extra string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/related; type=\"application/dicom\"; boundary=B\r\n%s\r\n", path, extra)
	return c
}

// TestUploadReservedAtOnce: an upload reserves its declared length when it
// begins. Stalled uploads that declared 4 MiB each hold a 16 MiB budget:
// the next upload is answered 429 with Retry-After before any of its body
// is sent (declared, or not: an undeclared body reserves a quarter of the
// budget), and one declared larger than the budget 413. Once the stalled
// clients leave, the budget is whole and a push is served.
func TestUploadReservedAtOnce(t *testing.T) {
	h := newHandler(t, WithMemoryBudget(16<<20), WithUploadTimeout(10*time.Minute), WithTimeout(10*time.Minute))
	srv := server(t, h)
	addr := strings.TrimPrefix(srv.URL, "http://")
	var stalled []net.Conn
	for range 3 {
		c := rawPost(t, addr, "/dicomweb/studies", fmt.Sprintf("Content-Length: %d\r\n", 4<<20))
		io.WriteString(c, "--B\r\nContent-Type: application/dicom\r\n\r\nDICM")
		stalled = append(stalled, c)
	}
	waitFor(func() bool { return h.m.uploads.Load() == 3 })
	if used := h.mem.used.Load(); used < 3*(4<<20) {
		t.Fatalf("3 uploads declared 4 MiB each and reserved %d bytes", used)
	}
	for _, c := range []struct {
		name, headers string
		status        int
		code          string
	}{
		{"declared", fmt.Sprintf("Content-Length: %d\r\n", 4<<20), 429, CodeOverloaded},
		{"undeclared", "Transfer-Encoding: chunked\r\n", 429, CodeOverloaded},
		{"larger than the budget", fmt.Sprintf("Content-Length: %d\r\n", 20<<20), 413, CodeUploadTooLarge},
	} {
		conn := rawPost(t, addr, "/dicomweb/studies", c.headers)
		conn.SetReadDeadline(time.Now().Add(time.Minute)) // an answer that waited for the body would never come
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || decodeError(t, b).Error.Code != c.code || !resp.Close {
			t.Errorf("%s: %d (close %v) %s", c.name, resp.StatusCode, resp.Close, b)
		}
		if c.status == 429 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: 429 without Retry-After", c.name)
		}
	}
	for _, c := range stalled {
		c.Close()
	}
	waitFor(func() bool { return h.mem.used.Load() == 0 })
	pa, ll := films("1.2.826.0.1.3680043.8.498.2801")
	if resp, b := stow(t, srv.Client(), srv.URL+"/dicomweb/studies?max_length=6", nil, dicomPart(pa), dicomPart(ll)); resp.StatusCode != 200 {
		t.Errorf("after the stalled uploads left: %d %s", resp.StatusCode, b)
	}
	if n := metricValue(t, h, `radgen_requests_total{route="/dicomweb/studies",outcome="overloaded"}`); n != 2 {
		t.Errorf("overloaded count %v", n)
	}
}

// chopReader returns its data in reads of the sizes steps gives in turn
// (1 to 256 times 509 bytes each, so that reads straddle the chunks).
type chopReader struct {
	data, steps []byte
	i           int
}

func (r *chopReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.steps) > 0 {
		n = min(n, (int(r.steps[r.i%len(r.steps)])+1)*509)
		r.i++
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// FuzzReadFile: whatever the reads' sizes, readFile keeps the file's
// bytes exactly, allocates no more than its length once it is read (its
// last chunk trimmed), draws that from the upload's credit and no more,
// and its head and reader give the file's bytes.
func FuzzReadFile(f *testing.F) {
	f.Add(bytes.Repeat([]byte("0123456789"), 20000), []byte{7, 200, 3})
	f.Add([]byte{}, []byte{})
	f.Add(make([]byte, uploadChunk), []byte{255})
	f.Add(make([]byte, uploadChunk+1), []byte{0})
	f.Fuzz(func(t *testing.T, data, steps []byte) {
		b := newMemBudget(1 << 30)
		res := b.newReservation()
		const room = 4 << 20
		if !res.try(room) {
			t.Fatal("no room")
		}
		cr := &credit{res: res, left: room}
		bl, e := readFile(context.Background(), &chopReader{data: data, steps: steps}, cr)
		if e != nil {
			if int64(len(data)) <= room-2*uploadChunk {
				t.Fatalf("%d bytes within the credit: %v", len(data), e)
			}
			return
		}
		if !bytes.Equal(bl.bytes(), data) || bl.len() != int64(len(data)) {
			t.Fatalf("kept %d bytes of %d, or other bytes", bl.len(), len(data))
		}
		if bl.size != bl.len() || room-cr.left != bl.size {
			t.Fatalf("%d bytes: %d allocated, %d drawn from the credit", bl.len(), bl.size, room-cr.left)
		}
		for _, n := range []int{0, 1, 132, len(data)} {
			if h := bl.head(n); !bytes.Equal(h, data[:min(n, len(data))]) {
				t.Fatalf("head(%d) is %d other bytes", n, len(h))
			}
		}
		if got, err := io.ReadAll(bl.reader()); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the reader gave %d other bytes (%v)", len(got), err)
		}
		cr.close()
		res.give(bl.size)
		if res.n != 0 || b.used.Load() != 0 {
			t.Fatalf("%d bytes still held", res.n)
		}
	})
}
