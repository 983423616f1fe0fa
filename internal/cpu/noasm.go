//go:build !amd64 || !gc || purego || noasm

package cpu

// assembly: this build has only the portable kernels.
const assembly = false
