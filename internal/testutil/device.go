package testutil

import (
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// deviceName matches the device names radgen.ParseDevice reads.
var deviceName = regexp.MustCompile(`^(cpu|reference|cuda(:(0|[1-9][0-9]{0,4}))?)$`)

// DeviceName returns the device the tests of a package run on, as named by
// RADGEN_DEVICE: "cpu" (the default when it is unset), "reference" (the
// reference engine, device buffers in Go memory) or "cuda:N". It logs the
// choice, and fails the test when the value is not a device name, so that
// a run meant for one device never passes on another. Whether the device
// can be opened is for the caller to check (radgen.Device.Check): an
// unusable device must fail the test too, never skip it.
func DeviceName(t testing.TB) string {
	t.Helper()
	v := strings.ToLower(strings.TrimSpace(os.Getenv("RADGEN_DEVICE")))
	if v == "" {
		v = "cpu"
	}
	if !deviceName.MatchString(v) {
		t.Fatalf("RADGEN_DEVICE=%q: want cpu, reference or cuda:N", os.Getenv("RADGEN_DEVICE"))
	}
	if v == "cuda" {
		v = "cuda:0"
	}
	t.Logf("device: %s (RADGEN_DEVICE)", v)
	return v
}

// Settled returns count (a device's live bytes, which cleanups lower
// after a collection) once collections stop changing it, trying at most
// 50 times.
func Settled(count func() int64) int64 {
	prev := int64(-1)
	for range 50 {
		runtime.GC()
		n := count()
		if n == prev {
			return n
		}
		prev = n
		runtime.Gosched()
	}
	return prev
}
