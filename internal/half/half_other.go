//go:build !amd64 || purego || noasm || !gc

package half

import "sync/atomic"

var noAsm atomic.Bool

func useAsm() bool { return false }

func encodeAsm([]uint16, []float32) { panic("half: no assembly") }

func decodeAsm([]float32, []uint16) { panic("half: no assembly") }

func dotF16(r, k int, x *float32, ldx int, w *uint16, ldw int, n int, y *float32, ldy int) {
	panic("half: no assembly")
}
