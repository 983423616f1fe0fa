package jpeg2000

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// workspace holds per-decode scratch state reused across tiles.
type workspace struct {
	workers int
	t1s     []*t1
	tmpI    []int32
	tmpF    []float32
}

func newWorkspace() *workspace {
	return &workspace{workers: max(runtime.GOMAXPROCS(0), 1)}
}

type blockJob struct {
	tc *tileComp
	b  *band
	cb *codeBlock
}

// parallel runs f(worker, i) for i in [0,n) on up to ws.workers goroutines.
func (ws *workspace) parallel(n int, f func(w, i int)) {
	nw := min(ws.workers, n)
	if nw <= 1 {
		for i := range n {
			f(0, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range nw {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(w, i)
			}
		}()
	}
	wg.Wait()
}

// blocks decodes every code-block of the tile with data, in parallel, into
// the tile-components' coefficient arrays.
func (ws *workspace) blocks(tl *tile) error {
	var jobs []blockJob
	for ci := range tl.comps {
		tc := &tl.comps[ci]
		for r := range tc.res {
			for bi := range tc.res[r].bands {
				b := &tc.res[r].bands[bi]
				for k := range b.cblks {
					if cb := &b.cblks[k]; cb.passes > 0 {
						jobs = append(jobs, blockJob{tc, b, cb})
					}
				}
			}
		}
	}
	for len(ws.t1s) < min(ws.workers, len(jobs)) {
		ws.t1s = append(ws.t1s, &t1{})
	}
	ws.parallel(len(jobs), func(w, i int) {
		j := jobs[i]
		t := ws.t1s[w]
		t.decodeBlock(j.cb, j.b.orient, j.tc.st.cbStyle, j.cb.numbps+j.tc.roi)
		t.store(j.tc, j.b, j.cb)
	})
	return nil
}

// store writes a decoded code-block into its tile-component array,
// undoing the ROI shift and dequantising.
func (t *t1) store(tc *tileComp, b *band, cb *codeBlock) {
	w, h := t.w, t.h
	s := w + 2
	x0 := cb.x0 - b.x0 + b.offX
	y0 := cb.y0 - b.y0 + b.offY
	roi := uint(tc.roi)
	thresh := uint32(1) << roi
	for y := range h {
		mag := t.mag[(y+1)*s+1 : (y+1)*s+1+w]
		flags := t.flags[(y+1)*s+1 : (y+1)*s+1+w]
		o := (y0+y)*tc.w + x0
		if tc.rev {
			dst := tc.coefI[o : o+w]
			if roi == 0 {
				for x, m := range mag {
					neg := int32(flags[x]>>15) & 1 // fNeg
					v := int32(m >> 1)
					dst[x] = (v ^ -neg) + neg
				}
				continue
			}
			for x, m := range mag {
				if m >= thresh {
					m >>= roi
				}
				v := int32(m >> 1)
				if flags[x]&fNeg != 0 {
					v = -v
				}
				dst[x] = v
			}
		} else {
			dst := tc.coefF[o : o+w]
			step := b.step * 0.5
			for x, m := range mag {
				if roi > 0 && m >= thresh {
					m >>= roi
				}
				v := float32(m) * step
				if flags[x]&fNeg != 0 {
					v = -v
				}
				dst[x] = v
			}
		}
	}
}
