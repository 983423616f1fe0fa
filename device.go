package radgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Device names where a tensor's storage lives: an engine kind and, for
// engines with several devices, an ordinal.
//
//   - [CPU]: host memory, run by the CPU kernels of internal/kernels and
//     internal/f32.
//   - [Reference]: the reference engine (internal/accel.Host), whose buffers
//     are device-style allocations in Go memory run by the CPU kernels; it
//     exercises the whole device code path on any machine.
//   - [CUDA](n): GPU n, with the cuda build tag.
//
// Every op checks that its operands share one device and runs on that
// device's engine, so module code never branches on the device. Devices are
// comparable values; the zero Device is CPU.
type Device uint32

const (
	kindCPU = iota
	kindReference
	kindCUDA
)

// ordinalBits is how many low bits of a Device hold the ordinal.
const ordinalBits = 16

// CPU is host memory.
const CPU Device = 0

// Reference returns the reference engine's device: device-style buffers in
// Go memory, run by the CPU kernels. It needs no hardware.
func Reference() Device { return Device(kindReference << ordinalBits) }

// CUDA returns NVIDIA GPU ordinal (from 0, as CUDA numbers them). It panics
// if ordinal is negative or not below 65536. The device is usable only in a
// build with the cuda tag on a machine with that GPU; see [Device.Check].
func CUDA(ordinal int) Device {
	if ordinal < 0 || ordinal >= 1<<ordinalBits {
		panic(fmt.Sprintf("radgen: CUDA ordinal %d out of range", ordinal))
	}
	return Device(kindCUDA<<ordinalBits | ordinal)
}

func (d Device) kind() int { return int(d >> ordinalBits) }

// Ordinal returns the device number within its engine kind (0 for CPU and
// the reference engine).
func (d Device) Ordinal() int { return int(d & (1<<ordinalBits - 1)) }

// IsCPU reports whether d is host memory run by the CPU kernels.
func (d Device) IsCPU() bool { return d == CPU }

// String returns "cpu", "reference" or "cuda:N", the form ParseDevice reads.
func (d Device) String() string {
	switch d.kind() {
	case kindCPU:
		if d == CPU {
			return "cpu"
		}
	case kindReference:
		if d.Ordinal() == 0 {
			return "reference"
		}
	case kindCUDA:
		return "cuda:" + strconv.Itoa(d.Ordinal())
	}
	return fmt.Sprintf("device(%#x)", uint32(d))
}

// ParseDevice reads a device name as String writes it: "cpu", "reference",
// "cuda:N", or "cuda" for cuda:0. Case and surrounding space are ignored.
// Whether the device can be used is a separate question ([Device.Check]).
func ParseDevice(s string) (Device, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	switch name {
	case "cpu":
		return CPU, nil
	case "reference":
		return Reference(), nil
	case "cuda":
		return CUDA(0), nil
	}
	if rest, ok := strings.CutPrefix(name, "cuda:"); ok {
		n, err := strconv.Atoi(rest)
		if err == nil && n >= 0 && n < 1<<ordinalBits && rest == strconv.Itoa(n) {
			return CUDA(n), nil
		}
	}
	return CPU, fmt.Errorf("radgen: unknown device %q (want cpu, reference or cuda:N)", s)
}

// Check opens d's engine if it is not open yet and reports why d cannot be
// used: a CUDA device in a build without the cuda tag, no driver, no such
// GPU. CPU and the reference engine are always usable.
func (d Device) Check() error {
	if d == CPU {
		return nil
	}
	_, err := engineOf(d)
	return err
}
