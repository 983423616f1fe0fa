package memtrans

import (
	"fmt"

	"github.com/radgen/radgen/decode"
	"github.com/radgen/radgen/internal/accel"
)

// devRows is the bookkeeping every device decoding shares: its rows and
// their studies, the buffers it owns, and key/value caches laid out
// (rowCap, heads, posCap, width) that grow and are reordered on the device.
type devRows struct {
	e              accel.Engine
	studies, rows  int
	t              int     // positions consumed
	study          []int32 // row → study (host)
	rowCap, posCap int

	owned          []accel.Ptr
	spareK, spareV accel.Ptr // spare cache-sized buffers for reordering
	ids, tokIDs    accel.Ptr // int32 scratch: reorder/gather ids, tokens (rowCap)
	logits         accel.Ptr
	hostIDs        []int32
	hostAttn       []float32

	rowK, rowV accel.Ptr // per-row cross keys/values when rows are not grouped by study
	rowKVCap   int       // floats each of rowK, rowV holds
}

func newDevRows(e accel.Engine, studies int) devRows {
	r := devRows{e: e, studies: studies, rows: studies, study: make([]int32, studies)}
	for i := range r.study {
		r.study[i] = int32(i)
	}
	return r
}

// Rows implements decode.Model.
func (s *devRows) Rows() int { return s.rows }

func (s *devRows) alloc(n int) (accel.Ptr, error) {
	p, err := s.e.AllocPtr(f32Bytes(max(n, 1)))
	if err != nil {
		return 0, err
	}
	s.owned = append(s.owned, p)
	return p, nil
}

// upload copies host floats to a new owned buffer.
func (s *devRows) upload(x []float32) (accel.Ptr, error) {
	p, err := s.alloc(len(x))
	if err != nil {
		return 0, err
	}
	return p, s.e.CopyIn(p, x)
}

// release frees one owned buffer.
func (s *devRows) release(p accel.Ptr) {
	for i, q := range s.owned {
		if q == p {
			s.owned = append(s.owned[:i], s.owned[i+1:]...)
			s.e.FreePtr(p)
			return
		}
	}
}

// realloc replaces *p by a fresh buffer of n floats holding the first
// keep floats of the old one.
func (s *devRows) realloc(p *accel.Ptr, n, keep int) error {
	q, err := s.alloc(n)
	if err != nil {
		return err
	}
	if *p != 0 {
		if keep > 0 {
			err = s.e.CopyDevice(q, *p, f32Bytes(keep))
		}
		s.release(*p)
	}
	*p = q
	return err
}

// meanAttention writes into dst the mean of blocks score blocks of
// (rows, width) that lie one after another at scores: a decoding's
// attention averaged over heads (and levels).
func (s *devRows) meanAttention(dst []float32, scores accel.Ptr, blocks, rows, width int) error {
	if len(dst) < rows*width {
		return fmt.Errorf("%w: attention buffer of %d for %d×%d", decode.ErrShape, len(dst), rows, width)
	}
	n := blocks * rows * width
	if cap(s.hostAttn) < n {
		s.hostAttn = make([]float32, n)
	}
	all := s.hostAttn[:n]
	if err := s.e.CopyOut(all, scores); err != nil {
		return err
	}
	clear(dst[:rows*width])
	for b := range blocks {
		for i, v := range all[b*rows*width : (b+1)*rows*width] {
			dst[i] += v / float32(blocks)
		}
	}
	return nil
}

// Close frees the decoding's device memory.
func (s *devRows) Close() {
	for _, p := range s.owned {
		s.e.FreePtr(p)
	}
	s.owned = nil
}

// growCache returns a (rc, heads, pc, width) cache holding old's filled
// positions of the current rows (old may be 0).
func (s *devRows) growCache(old accel.Ptr, heads, width, rc, pc int) (accel.Ptr, error) {
	p, err := s.alloc(rc * heads * pc * width)
	if err != nil || old == 0 {
		return p, err
	}
	if pc == s.posCap { // rows only: the old layout is a prefix
		err = s.e.CopyDevice(p, old, f32Bytes(s.rows*heads*s.posCap*width))
	} else {
		for r := 0; r < s.rows*heads && err == nil; r++ {
			err = s.e.CopyDevice(p.Add(r*pc*width), old.Add(r*s.posCap*width), f32Bytes(s.t*width))
		}
	}
	s.release(old)
	return p, err
}

// embed writes x[r] = scale·table[tokens[r]] + pos for every row: the
// step's input embedding, pos being the position's row of the table.
func (s *devRows) embed(x, table, pos accel.Ptr, tokens []int, vocab, d int, scale float32) error {
	s.hostIDs = s.hostIDs[:0]
	for _, tok := range tokens {
		s.hostIDs = append(s.hostIDs, int32(tok))
	}
	if err := s.e.CopyInInt32(s.tokIDs, s.hostIDs); err != nil {
		return err
	}
	if err := s.e.Gather(x, table, s.tokIDs, len(tokens), vocab, d, scale); err != nil {
		return err
	}
	return s.e.Add(x, x, pos, len(tokens), d, accel.RowVector)
}

// emit turns the step's logits (rows, vocab) into log-probabilities, copies
// them to dst and advances the position.
func (s *devRows) emit(dst []float32, vocab int) error {
	n := s.rows * vocab
	if err := s.e.LogSoftmax(s.logits, s.logits, s.rows, vocab); err != nil {
		return err
	}
	if err := s.e.CopyOut(dst[:n], s.logits); err != nil {
		return err
	}
	s.t++
	return nil
}

// checkReorder validates a decode.Model.Reorder argument.
func (s *devRows) checkReorder(src []int) error {
	if len(src) == 0 {
		return fmt.Errorf("%w: reorder to zero rows", decode.ErrShape)
	}
	for _, r := range src {
		if r < 0 || r >= s.rows {
			return fmt.Errorf("%w: reorder index %d of %d rows", decode.ErrShape, r, s.rows)
		}
	}
	return nil
}

// reorderCaches makes row i a copy of row src[i] in every cache of keys
// (kw floats a row) and values (vw), and in the per-row state (sw floats a
// row, 0 for none) at *state with its spare *stateSpare; the caller has
// sized everything for len(src) rows.
func (s *devRows) reorderCaches(src []int, keys, vals []accel.Ptr, kw, vw int, state, stateSpare *accel.Ptr, sw int) error {
	s.hostIDs = s.hostIDs[:0]
	study := make([]int32, len(src))
	for i, r := range src {
		s.hostIDs = append(s.hostIDs, int32(r))
		study[i] = s.study[r]
	}
	if err := s.e.CopyInInt32(s.ids, s.hostIDs); err != nil {
		return err
	}
	for l := range keys {
		for _, c := range []struct {
			p     *accel.Ptr
			spare *accel.Ptr
			w     int
		}{{&keys[l], &s.spareK, kw}, {&vals[l], &s.spareV, vw}} {
			if err := s.e.Gather(*c.spare, *c.p, s.ids, len(src), s.rows, c.w, 1); err != nil {
				return err
			}
			*c.p, *c.spare = *c.spare, *c.p
		}
	}
	if sw > 0 {
		if err := s.e.Gather(*stateSpare, *state, s.ids, len(src), s.rows, sw, 1); err != nil {
			return err
		}
		*state, *stateSpare = *stateSpare, *state
	}
	s.study, s.rows = study, len(src)
	return nil
}

// grouped reports whether the rows are grouped by study, study-major with
// the same number each (every strategy's layout), and how many.
func (s *devRows) grouped() (per int, ok bool) {
	if s.rows%s.studies != 0 {
		return 0, false
	}
	per = s.rows / s.studies
	for r, st := range s.study {
		if int(st) != r/per {
			return 0, false
		}
	}
	return per, true
}

// crossSource returns cross-attention keys and values (kw and vw floats
// per study at keys and vals) for the current rows as groups of per rows
// that share one study's block: the studies themselves when the rows are
// grouped, else one block per row, gathered from its study's.
func (s *devRows) crossSource(keys, vals accel.Ptr, kw, vw int) (k, v accel.Ptr, groups, per int, err error) {
	if per, ok := s.grouped(); ok {
		return keys, vals, s.studies, per, nil
	}
	if n := s.rowCap * max(kw, vw); s.rowKVCap < n {
		if err = s.realloc(&s.rowK, n, 0); err != nil {
			return
		}
		if err = s.realloc(&s.rowV, n, 0); err != nil {
			return
		}
		s.rowKVCap = n
	}
	if err = s.studyIDs(); err != nil {
		return
	}
	if err = s.e.Gather(s.rowK, keys, s.ids, s.rows, s.studies, kw, 1); err != nil {
		return
	}
	if err = s.e.Gather(s.rowV, vals, s.ids, s.rows, s.studies, vw, 1); err != nil {
		return
	}
	return s.rowK, s.rowV, s.rows, 1, nil
}

// studyIDs writes each row's study into s.ids.
func (s *devRows) studyIDs() error {
	s.hostIDs = append(s.hostIDs[:0], s.study...)
	return s.e.CopyInInt32(s.ids, s.hostIDs)
}
