package radgen

// Device names where a tensor's storage lives.
//
// Every op checks that its operands share one device. The CPU kernels live in
// internal/kernels and internal/f32; a CUDA engine (build tag cuda) plugs in
// behind the same ops, so module code never branches on the device.
type Device uint8

const (
	// CPU is host memory.
	CPU Device = iota
	// CUDA is the memory of an NVIDIA GPU, available with the cuda build tag.
	CUDA
)

// String returns "cpu" or "cuda".
func (d Device) String() string {
	switch d {
	case CPU:
		return "cpu"
	case CUDA:
		return "cuda"
	}
	return "device?"
}
