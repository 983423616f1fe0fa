package kernels

// Selectors and constants the engines share (internal/accel's host engine
// and internal/cuda), so that one definition serves both and none needs a
// mapping between copies.

// BinaryOp picks an element-wise operation of two operands.
type BinaryOp int

const (
	// OpAdd is a + b.
	OpAdd BinaryOp = iota
	// OpSub is a − b.
	OpSub
	// OpMul is a ⊙ b.
	OpMul
	// OpMaskFill is a where b ≠ 0, value elsewhere (with value 0 it is the
	// backward pass of a masked fill).
	OpMaskFill
)

// Activation picks an activation function (for its backward pass).
type Activation int

const (
	// ActReLU is max(x, 0).
	ActReLU Activation = iota
	// ActTanh is tanh(x).
	ActTanh
	// ActSigmoid is 1/(1 + exp(−x)).
	ActSigmoid
)

// AdamConsts are one parameter's scalars for an Adam step, rounded to
// float32 where ATen rounds a Python scalar to the tensor's dtype
// (memtrans/optim computes them; see its Adam.Step for the update).
type AdamConsts struct {
	WD         float32 // L2 penalty: grad + WD·param (0: none)
	Decay      float32 // decoupled weight decay: param·Decay first
	Decoupled  bool    // AdamW
	Beta1      float32 // exp_avg.mul_(β1)
	OneMinusB1 float32 // .add_(grad, alpha=1−β1)
	Beta2      float32 // exp_avg_sq.mul_(β2)
	OneMinusB2 float32 // .addcmul_(grad, grad, value=1−β2)
	BC2Sqrt    float32 // denom = sqrt(v̂)/BC2Sqrt + Eps
	Eps        float32
	NegStepLen float32 // param.addcdiv_(exp_avg, denom, value=NegStepLen)
	AMSGrad    bool    // v̂ is the running maximum kept at vmax
}
