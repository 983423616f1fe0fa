package jpeg2000

// Tier-1: EBCOT code-block decoding (T.800 Annex D).
//
// Each sample of a code-block has a flag word in a (h+2)×(w+2) array with a
// border of always-insignificant samples, so neighbour reads need no bounds
// checks. A flag word caches its eight neighbours' significance and the signs
// of its four direct neighbours; making a sample significant updates its
// neighbours' words, so every context is a table lookup on one word.

const (
	fN      = 1 << 0 // north neighbour significant
	fS      = 1 << 1
	fW      = 1 << 2
	fE      = 1 << 3
	fNW     = 1 << 4
	fNE     = 1 << 5
	fSW     = 1 << 6
	fSE     = 1 << 7
	fNneg   = 1 << 8 // north neighbour negative
	fSneg   = 1 << 9
	fWneg   = 1 << 10
	fEneg   = 1 << 11
	fSig    = 1 << 12 // significant
	fVisit  = 1 << 13 // coded in this bit-plane's significance pass
	fRefine = 1 << 14 // refined at least once
	fNeg    = 1 << 15 // negative

	fNeighbours = 0xFF
	// fCausal masks the next stripe's samples out of the context of a
	// stripe's last row in vertically causal mode.
	fCausal = ^uint32(fS | fSW | fSE | fSneg)
)

// zcLUT gives the zero coding context for each orientation and neighbour
// pattern (T.800 Table D.1); scLUT the sign context and XOR bit (bit 7)
// for each direct-neighbour significance and sign pattern (Table D.3).
var zcLUT, scLUT = func() ([4][256]uint8, [256]uint8) {
	var zc [4][256]uint8
	for o := range 4 {
		for f := range 256 {
			h := (f>>2)&1 + (f>>3)&1
			v := f&1 + (f>>1)&1
			d := (f>>4)&1 + (f>>5)&1 + (f>>6)&1 + (f>>7)&1
			if o == 1 {
				h, v = v, h
			}
			var c int
			if o == 3 {
				hv := h + v
				switch {
				case d >= 3:
					c = 8
				case d == 2:
					c = 6
					if hv >= 1 {
						c = 7
					}
				case d == 1:
					c = 3 + min(hv, 2)
				default:
					c = min(hv, 2)
				}
			} else {
				switch {
				case h == 2:
					c = 8
				case h == 1:
					switch {
					case v >= 1:
						c = 7
					case d >= 1:
						c = 6
					default:
						c = 5
					}
				case v == 2:
					c = 4
				case v == 1:
					c = 3
				default:
					c = min(d, 2)
				}
			}
			zc[o][f] = uint8(ctxZC + c)
		}
	}
	var sc [256]uint8
	for f := range 256 {
		// bits 0-3: N S W E significant; bits 4-7: N S W E negative.
		contrib := func(sig, neg int) int {
			if sig == 0 {
				return 0
			}
			if neg != 0 {
				return -1
			}
			return 1
		}
		v := contrib(f&1, f>>4&1) + contrib(f>>1&1, f>>5&1)
		h := contrib(f>>2&1, f>>6&1) + contrib(f>>3&1, f>>7&1)
		h, v = max(-1, min(1, h)), max(-1, min(1, v))
		// Table D.3: H = 1 gives contexts 13, 12, 11 for V = 1, 0, -1;
		// H = -1 the same for V = -1, 0, 1 with the sign flipped; H = 0
		// gives 10, 9, 10, flipped for V = -1.
		var c, x int
		switch h {
		case 1:
			c = 12 + v
		case -1:
			c, x = 12-v, 1
		default:
			c = 9 + v*v
			if v == -1 {
				x = 1
			}
		}
		sc[f] = uint8(ctxSC+c-9) | uint8(x)<<7
	}
	return zc, sc
}()

func scIndex(f uint32) uint32 {
	return f&0xF | (f>>4)&0xF0
}

// t1 is one worker's code-block decoder state.
type t1 struct {
	flags []uint32
	mag   []uint32 // magnitude ×2 (one fractional bit, T.800 E.1.1.2 mid-point)
	w, h  int
	mq    mqDecoder
	raw   rawDecoder
}

// decodeBlock decodes a code-block's segments. orient is the band
// orientation, numbps its magnitude bit-planes (ROI shift included).
func (t *t1) decodeBlock(cb *codeBlock, orient int, cbStyle byte, numbps int) {
	w, h := cb.x1-cb.x0, cb.y1-cb.y0
	t.w, t.h = w, h
	n := (w + 2) * (h + 2)
	if cap(t.flags) < n {
		t.flags = make([]uint32, n)
		t.mag = make([]uint32, n)
	}
	t.flags = t.flags[:n]
	t.mag = t.mag[:n]
	clear(t.flags)
	clear(t.mag)
	t.mq.resetContexts()
	p := numbps - 1
	pass := 2 // 0 significance propagation, 1 refinement, 2 cleanup
	idx := 0
	zc := &zcLUT[orient]
	for si := range cb.segs {
		sg := &cb.segs[si]
		if sg.passes == 0 {
			break
		}
		bypass := cbStyle&cbBypass != 0 && idx >= 10 && pass != 2
		if bypass {
			t.raw.init(sg.data)
		} else {
			t.mq.init(sg.data)
		}
		for range sg.passes {
			if p < 0 {
				return
			}
			raw := cbStyle&cbBypass != 0 && idx >= 10 && pass != 2
			switch pass {
			case 0:
				if raw {
					t.sigPassRaw(p, cbStyle)
				} else {
					t.sigPass(p, zc, cbStyle)
				}
			case 1:
				if raw {
					t.refPassRaw(p, cbStyle)
				} else {
					t.refPass(p, cbStyle)
				}
			case 2:
				t.cleanup(p, zc, cbStyle)
			}
			if cbStyle&cbReset != 0 {
				t.mq.resetContexts()
			}
			if pass == 2 {
				pass = 0
				p--
			} else {
				pass++
			}
			idx++
		}
	}
}

// setSig makes sample i significant with sign neg and updates its neighbours.
func (t *t1) setSig(i int, neg uint32) {
	s := t.w + 2
	f := t.flags
	_ = f[i+s+1]
	_ = f[i-s-1]
	if neg != 0 {
		f[i] |= fSig | fNeg
		f[i-s] |= fS | fSneg
		f[i+s] |= fN | fNneg
		f[i-1] |= fE | fEneg
		f[i+1] |= fW | fWneg
	} else {
		f[i] |= fSig
		f[i-s] |= fS
		f[i+s] |= fN
		f[i-1] |= fE
		f[i+1] |= fW
	}
	f[i-s-1] |= fSE
	f[i-s+1] |= fSW
	f[i+s-1] |= fNE
	f[i+s+1] |= fNW
}

func (t *t1) sigPass(p int, zc *[256]uint8, cbStyle byte) {
	s := t.w + 2
	vsc := cbStyle&cbVSC != 0
	one := uint32(3) << p
	mq := &t.mq
	// The MQ registers live in locals. Each decision below is
	// mqDecoder.decode written out on them (T.800 C.3.2): an MPS, the
	// conditional MPS exchange or the LPS exchange, then renormalisation;
	// only bytein goes through the struct.
	a, c, ct := mq.a, mq.c, mq.ct
	var st *mqState
	flags := t.flags
	for y0 := 0; y0 < t.h; y0 += 4 {
		y1 := min(y0+4, t.h)
		for x := range t.w {
			i := (y0+1)*s + x + 1
			if y1-y0 == 4 {
				// Skip a stripe column with no candidate: no sample has
				// a significant neighbour, or all are significant.
				or := flags[i] | flags[i+s] | flags[i+2*s] | flags[i+3*s]
				and := flags[i] & flags[i+s] & flags[i+2*s] & flags[i+3*s]
				if or&fNeighbours == 0 || and&fSig != 0 {
					continue
				}
			}
			for y := y0; y < y1; y, i = y+1, i+s {
				f := flags[i]
				if f&fSig != 0 || f&fNeighbours == 0 {
					continue
				}
				if vsc && y == y0+3 {
					f &= fCausal
					if f&fNeighbours == 0 {
						continue
					}
				}
				var bit uint32
				st = &mqStates[mq.cx[(zc[f&fNeighbours])&31]]
				a -= st.qe
				if c >= st.qe16 {
					c -= st.qe16
					bit = st.mps
					if a&0x8000 == 0 {
						bit = mq.exchangeMPS(zc[f&fNeighbours], st, a)
					}
				} else {
					bit = mq.exchangeLPS(zc[f&fNeighbours], st, a)
					a = st.qe
				}
				for a&0x8000 == 0 {
					if ct == 0 {
						mq.c = c
						mq.bytein()
						c, ct = mq.c, mq.ct
					}
					a <<= 1
					c <<= 1
					ct--
				}
				if bit != 0 {
					sc := scLUT[scIndex(f)]
					var neg uint32
					st = &mqStates[mq.cx[(sc&0x7F)&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						neg = st.mps
						if a&0x8000 == 0 {
							neg = mq.exchangeMPS(sc&0x7F, st, a)
						}
					} else {
						neg = mq.exchangeLPS(sc&0x7F, st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					t.mag[i] = one
					t.setSig(i, neg^uint32(sc>>7))
				}
				flags[i] |= fVisit
			}
		}
	}
	mq.a, mq.c, mq.ct = a, c, ct
}

func (t *t1) sigPassRaw(p int, cbStyle byte) {
	s := t.w + 2
	vsc := cbStyle&cbVSC != 0
	one := uint32(3) << p
	for y0 := 0; y0 < t.h; y0 += 4 {
		y1 := min(y0+4, t.h)
		for x := range t.w {
			i := (y0+1)*s + x + 1
			for y := y0; y < y1; y, i = y+1, i+s {
				f := t.flags[i]
				if f&fSig != 0 || f&fNeighbours == 0 {
					continue
				}
				if vsc && y == y0+3 && f&fCausal&fNeighbours == 0 {
					continue
				}
				if t.raw.bit() != 0 {
					neg := t.raw.bit()
					t.mag[i] = one
					t.setSig(i, neg)
				}
				t.flags[i] |= fVisit
			}
		}
	}
}

func (t *t1) refPass(p int, cbStyle byte) {
	s := t.w + 2
	vsc := cbStyle&cbVSC != 0
	half := uint32(1) << p
	mq := &t.mq
	a, c, ct := mq.a, mq.c, mq.ct
	var st *mqState
	flags := t.flags
	for y0 := 0; y0 < t.h; y0 += 4 {
		y1 := min(y0+4, t.h)
		for x := range t.w {
			i := (y0+1)*s + x + 1
			if y1-y0 == 4 && (flags[i]|flags[i+s]|flags[i+2*s]|flags[i+3*s])&fSig == 0 {
				continue
			}
			for y := y0; y < y1; y, i = y+1, i+s {
				f := flags[i]
				if f&(fSig|fVisit) != fSig {
					continue
				}
				if vsc && y == y0+3 {
					f &= fCausal
				}
				ctx := uint8(ctxMR)
				switch {
				case f&fRefine != 0:
					ctx = ctxMR + 2
				case f&fNeighbours != 0:
					ctx = ctxMR + 1
				}
				var b uint32
				st = &mqStates[mq.cx[(ctx)&31]]
				a -= st.qe
				if c >= st.qe16 {
					c -= st.qe16
					b = st.mps
					if a&0x8000 == 0 {
						b = mq.exchangeMPS(ctx, st, a)
					}
				} else {
					b = mq.exchangeLPS(ctx, st, a)
					a = st.qe
				}
				for a&0x8000 == 0 {
					if ct == 0 {
						mq.c = c
						mq.bytein()
						c, ct = mq.c, mq.ct
					}
					a <<= 1
					c <<= 1
					ct--
				}
				t.mag[i] += b<<(p+1) - half
				flags[i] |= fRefine
			}
		}
	}
	mq.a, mq.c, mq.ct = a, c, ct
}

func (t *t1) refPassRaw(p int, cbStyle byte) {
	s := t.w + 2
	half := uint32(1) << p
	for y0 := 0; y0 < t.h; y0 += 4 {
		y1 := min(y0+4, t.h)
		for x := range t.w {
			i := (y0+1)*s + x + 1
			for y := y0; y < y1; y, i = y+1, i+s {
				if t.flags[i]&(fSig|fVisit) != fSig {
					continue
				}
				b := t.raw.bit()
				t.mag[i] += b<<(p+1) - half
				t.flags[i] |= fRefine
			}
		}
	}
}

func (t *t1) cleanup(p int, zc *[256]uint8, cbStyle byte) {
	s := t.w + 2
	vsc := cbStyle&cbVSC != 0
	one := uint32(3) << p
	mq := &t.mq
	a, c, ct := mq.a, mq.c, mq.ct
	var st *mqState
	flags := t.flags
	for y0 := 0; y0 < t.h; y0 += 4 {
		y1 := min(y0+4, t.h)
		for x := range t.w {
			i := (y0+1)*s + x + 1
			start := y0
			if y1-y0 == 4 {
				f3 := flags[i+3*s]
				if vsc {
					f3 &= fCausal
				}
				if (flags[i]|flags[i+s]|flags[i+2*s]|f3)&(fSig|fVisit|fNeighbours) == 0 {
					var bit, r0, r1, neg uint32
					st = &mqStates[mq.cx[(ctxRL)&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						bit = st.mps
						if a&0x8000 == 0 {
							bit = mq.exchangeMPS(ctxRL, st, a)
						}
					} else {
						bit = mq.exchangeLPS(ctxRL, st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					if bit == 0 {
						continue
					}
					st = &mqStates[mq.cx[(ctxUNI)&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						r0 = st.mps
						if a&0x8000 == 0 {
							r0 = mq.exchangeMPS(ctxUNI, st, a)
						}
					} else {
						r0 = mq.exchangeLPS(ctxUNI, st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					st = &mqStates[mq.cx[(ctxUNI)&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						r1 = st.mps
						if a&0x8000 == 0 {
							r1 = mq.exchangeMPS(ctxUNI, st, a)
						}
					} else {
						r1 = mq.exchangeLPS(ctxUNI, st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					r := int(r0<<1 | r1)
					j := i + r*s
					f := flags[j]
					if vsc && r == 3 {
						f &= fCausal
					}
					sc := scLUT[scIndex(f)]
					st = &mqStates[mq.cx[(sc&0x7F)&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						neg = st.mps
						if a&0x8000 == 0 {
							neg = mq.exchangeMPS(sc&0x7F, st, a)
						}
					} else {
						neg = mq.exchangeLPS(sc&0x7F, st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					t.mag[j] = one
					t.setSig(j, neg^uint32(sc>>7))
					start = y0 + r + 1
					i = j + s
				}
			}
			for y := start; y < y1; y, i = y+1, i+s {
				f := flags[i]
				if f&(fSig|fVisit) == 0 {
					if vsc && y == y0+3 {
						f &= fCausal
					}
					var bit uint32
					st = &mqStates[mq.cx[(zc[f&fNeighbours])&31]]
					a -= st.qe
					if c >= st.qe16 {
						c -= st.qe16
						bit = st.mps
						if a&0x8000 == 0 {
							bit = mq.exchangeMPS(zc[f&fNeighbours], st, a)
						}
					} else {
						bit = mq.exchangeLPS(zc[f&fNeighbours], st, a)
						a = st.qe
					}
					for a&0x8000 == 0 {
						if ct == 0 {
							mq.c = c
							mq.bytein()
							c, ct = mq.c, mq.ct
						}
						a <<= 1
						c <<= 1
						ct--
					}
					if bit != 0 {
						sc := scLUT[scIndex(f)]
						var neg uint32
						st = &mqStates[mq.cx[(sc&0x7F)&31]]
						a -= st.qe
						if c >= st.qe16 {
							c -= st.qe16
							neg = st.mps
							if a&0x8000 == 0 {
								neg = mq.exchangeMPS(sc&0x7F, st, a)
							}
						} else {
							neg = mq.exchangeLPS(sc&0x7F, st, a)
							a = st.qe
						}
						for a&0x8000 == 0 {
							if ct == 0 {
								mq.c = c
								mq.bytein()
								c, ct = mq.c, mq.ct
							}
							a <<= 1
							c <<= 1
							ct--
						}
						t.mag[i] = one
						t.setSig(i, neg^uint32(sc>>7))
					}
				}
				flags[i] &^= fVisit
			}
		}
	}
	mq.a, mq.c, mq.ct = a, c, ct
	if cbStyle&cbSegSym != 0 {
		for range 4 {
			mq.decode(ctxUNI)
		}
	}
}
