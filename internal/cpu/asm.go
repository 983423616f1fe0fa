//go:build amd64 && gc && !purego && !noasm

package cpu

// assembly: this build has the kernels' assembly (internal/f32 and
// internal/half are built with it under the same tags).
const assembly = true
