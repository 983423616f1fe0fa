package accel

import (
	"math"
	"math/rand/v2"
	"testing"
)

// opCase runs one operation on an engine over fresh copies of its inputs
// and returns its output.
type opCase struct {
	name string
	run  func(t *testing.T, e Engine, in [][]float32) []float32
	in   [][]float32
}

func agreeCases(rng *rand.Rand) []opCase {
	r := func(n int) []float32 { return randSlice(rng, n) }
	out := func(t *testing.T, e Engine, n int) Ptr { return upload(t, e, make([]float32, n)) }
	return []opCase{
		{"GemmStrided", func(t *testing.T, e Engine, in [][]float32) []float32 {
			a, b, c := upload(t, e, in[0]), upload(t, e, in[1]), out(t, e, 4*3*5)
			if err := e.GemmStrided(false, true, 4, 3, 5, 7, 0.5, a, 7, 21, b, 7, 35, 0, c, 5, 15); err != nil {
				t.Fatal(err)
			}
			return download(t, e, c, 60)
		}, [][]float32{r(4 * 21), r(4 * 35)}},
		{"Softmax", func(t *testing.T, e Engine, in [][]float32) []float32 {
			x := upload(t, e, in[0])
			if err := e.Softmax(x, x, 7, 61); err != nil {
				t.Fatal(err)
			}
			return download(t, e, x, 7*61)
		}, [][]float32{r(7 * 61)}},
		{"LogSoftmax", func(t *testing.T, e Engine, in [][]float32) []float32 {
			x := upload(t, e, in[0])
			if err := e.LogSoftmax(x, x, 5, 761); err != nil {
				t.Fatal(err)
			}
			return download(t, e, x, 5*761)
		}, [][]float32{r(5 * 761)}},
		{"Elementwise", func(t *testing.T, e Engine, in [][]float32) []float32 {
			a, b := upload(t, e, in[0]), upload(t, e, in[1])
			if err := e.ReLU(b, a, 10); err != nil {
				t.Fatal(err)
			}
			if err := e.Tanh(a.Add(10), a.Add(10), 10); err != nil {
				t.Fatal(err)
			}
			if err := e.Sigmoid(a.Add(20), a.Add(20), 10); err != nil {
				t.Fatal(err)
			}
			if err := e.Scale(b, b, -0.5, 10); err != nil {
				t.Fatal(err)
			}
			return append(download(t, e, a, 30), download(t, e, b, 10)...)
		}, [][]float32{r(30), r(10)}},
		{"Gather", func(t *testing.T, e Engine, in [][]float32) []float32 {
			table, ids, y := upload(t, e, in[0]), upload(t, e, make([]float32, 5)), out(t, e, 5*33)
			if err := e.CopyInInt32(ids, []int32{6, -1, 0, 6, 7}); err != nil {
				t.Fatal(err)
			}
			if err := e.Gather(y, table, ids, 5, 7, 33, 22.627417); err != nil {
				t.Fatal(err)
			}
			return download(t, e, y, 5*33)
		}, [][]float32{r(7 * 33)}},
	}
}

// On a GPU, every operation of the CUDA engine equals the host engine's
// within 1e-5 relative (FP32 cuBLAS). Skipped without a GPU.
func TestEnginesAgree(t *testing.T) {
	gpu, err := OpenCUDA(0)
	if err != nil {
		t.Skipf("no CUDA engine here: %v", err)
	}
	defer gpu.Close()
	host := NewHost()
	defer host.Close()
	for _, c := range agreeCases(rand.New(rand.NewPCG(3, 4))) {
		want := c.run(t, host, c.in)
		got := c.run(t, gpu, c.in)
		var worst float64
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(got[i]-want[i]))/math.Max(1, math.Abs(float64(want[i]))))
		}
		t.Logf("%s: max relative |Δ| %.3g", c.name, worst)
		if worst > 1e-5 {
			t.Errorf("%s: GPU and host differ by %.3g", c.name, worst)
		}
	}
}

// The cases run on the host engine (so they cannot rot unseen).
func TestAgreeCasesRunOnHost(t *testing.T) {
	host := NewHost()
	defer host.Close()
	for _, c := range agreeCases(rand.New(rand.NewPCG(3, 4))) {
		got := c.run(t, host, c.in)
		for i, v := range got {
			if math.IsNaN(float64(v)) {
				t.Fatalf("%s[%d] is NaN", c.name, i)
			}
		}
	}
}
