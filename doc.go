// Package radgen is the shared vocabulary of an embeddable library that
// writes radiology reports from chest X-rays with memory-driven
// Transformers: tensors on a device ([Tensor], [Device]), the autograd graph
// whose methods are the ops ([Graph], [NewGraph], [NoGrad]), and modules
// with named parameters ([Module], [Linear]) saved and loaded as
// safetensors ([SaveWeights], [OpenWeights], [LoadParams]). The models live
// in the packages below it: a service that writes reports starts from
// memtrans, not from here.
//
// # Packages
//
//	radgen (this one)  Tensor (storage: a *tensor.Dense of gorgonia.org/tensor), Graph
//	                   (reverse-mode autodiff; NoGrad for inference), Module and named
//	                   parameters whose names equal PyTorch state_dict names
//	vision             image decoding and preprocessing, torchvision-compatible ResNets
//	mesh               the attention modules: multi-head, M²'s memory-augmented and meshed forms
//	relmem             R2Gen's relational memory (and Mem2Mem's memory bank)
//	mcln               memory-driven conditional layer norm, R2Gen's LayerNorm
//	decode             greedy, beam search, sampling over any step-wise model
//	memtrans           the facade: configurations, the full generator, training
//	memtrans/arch      what an encoder–decoder architecture implements, and its registry
//	memtrans/r2gen     R2Gen's encoder–decoder; memtrans/m2 and memtrans/metrans the others
//	memtrans/data      tokenizer, IU X-Ray and MIMIC-CXR loaders, synthetic chest films
//	memtrans/metrics   BLEU, ROUGE-L, CIDEr-D; metrics/meteor (METEOR 1.5) and
//	                   metrics/chexpert (the 14 CheXpert observations and clinical efficacy)
//	memtrans/optim     Adam (amsgrad), clipping, schedules
//	memtrans/synth     synthetic chest films with known findings, to try a model end to end
//
// The report service and the hospital's transport:
//
//	memtrans/serve     the HTTP report service (/v1 routes, STOW-RS), bounded under load
//	memtrans/dicomweb  a DICOMweb client (QIDO-RS, WADO-RS, STOW-RS) that treats its peer as untrusted
//	memtrans/pacs      a worker that finds new studies on a PACS, writes their reports and stores them
//	memtrans/dicomsr   the report as a DICOM Basic Text SR
//	memtrans/fhir      the report as a FHIR R4 DiagnosticReport, with the Device that wrote it
//	memtrans/hl7       the report as an HL7 v2.5 ORU^R01 message over MLLP
//	memtrans/cli       the radgen command and the report server as a package, for any architecture
//
// # Where each equation lives
//
// R2Gen: Chen, Song, Chang and Wan, "Generating Radiology Reports via
// Memory-driven Transformer", EMNLP 2020.
//
//	Eq. 1   visual extractor f_v: patch features        vision (ResNet.Forward, Extractor)
//	Eq. 2   encoder f_e                                  memtrans/r2gen (Encoder, EncoderLayer), mesh (attention)
//	Eq. 3   decoder f_d with MCLN(RM(·))                 memtrans/r2gen (Decoder, DecoderLayer, Decoding)
//	Eqs. 4–5 likelihood and training objective           memtrans/r2gen (Model.Loss), memtrans/arch (LanguageModelLoss), memtrans/optim
//	Eq. 6   memory attention over [M; y]                 relmem (Relational.Step), mesh
//	Eq. 7   M̃ = f_mlp(Z + M) + Z + M                     relmem (Relational.Step)
//	Eqs. 8–9 forget and input gates                      relmem (Relational.Step)
//	Eq. 10  gated memory update                          relmem (Relational.Step)
//	Eqs. 11–14 Δγ, γ̂, Δβ, β̂ from the memory             mcln (Conditional.Deltas)
//	Eq. 15  f_mcln                                       mcln (Conditional.Apply)
//
// Scaled dot-product and multi-head attention (Vaswani et al. 2017, Eq. 1)
// are in mesh. The other seeds — the Meshed-Memory Transformer (Cornia et
// al. 2020), Mem2Mem, METransformer and layer-wise multi-view decoding —
// are composed from mesh, relmem and decode as architectures registered
// with memtrans/arch (memtrans/m2, memtrans/metrans, options of
// memtrans/r2gen); each function cites the equation it implements.
//
// # Tensors and graphs
//
// A [Tensor] is dense, row-major and float32 (float64 exists for gradient
// checks). Ops are methods of a [Graph]: a recording graph ([NewGraph])
// remembers them for [Graph.Backward]; a [NoGrad] graph records nothing.
// A graph belongs to one goroutine at a time and costs nothing to make: a
// loaded model serves many requests at once with a graph for each (its
// parameters are only read). Shapes are written (B, T, D): batch,
// positions, width. Shape errors inside numeric code are programmer errors
// and panic with a "radgen: " prefix; bad data from outside (files, images,
// requests) is always reported as an error by the packages that read it.
//
// A computation that runs step by step (an incremental decoding) keeps
// what later steps read in a [Rows], a matrix that grows by rows:
// appending, viewing and gathering are ops of the graph like the others, on
// any device and with gradients, and appending writes into the storage it
// keeps across steps. A recurrent state that a beam search reorders
// between steps (a decoding's memory) goes in a [Carried]. On the CPU a
// step's results come from an [Arena].
//
// A training step that runs the steps before it again, on batches of the
// same shapes, makes its recording graph in a [StepMemory] ([InStepMemory]):
// the float32 CPU results, their gradients and the parameters' gradients
// take the memory of the step before, which the new graph overwrites, so
// that a warm step allocates almost nothing (memtrans's Trainer does it).
// It is memory reuse only: the values are those of a graph without one.
//
// The CPU engine runs the backward pass of a long tape on every core: an
// op's backward pass runs once every op that read its result has sent its
// gradient, and the ops that send to one tensor's gradient do so one at a
// time in the order of the tape, so that the gradients are those of a pass
// on one goroutine, bit for bit, while independent work (the relational
// memory's recurrence and the encoder, say) runs side by side.
//
// # Modules and parameters
//
// A [Module] lists its parameters by name ([Module.VisitParams]; [Prefixed]
// nests a sublayer's names), and the names are PyTorch's state_dict names,
// so that [Params], [StateDict] and [LoadParams] read and fill a model from
// a published checkpoint. [SaveWeights] writes a module as safetensors and
// [OpenWeights] reads such a file lazily, tensor by tensor.
//
// # Deferred products
//
// Modules say what they compute, in plain ops; scheduling is the
// engine's. On a graph that records nothing, the CPU engine defers the
// products of a few rows that a decoding step is made of ([Graph.Linear]
// of float32 input of at most 48 rows): a product is not computed when it
// is issued but when its result is first read, with every other product
// the graph has deferred by then, in one batch that reads each weight once
// and shares the output columns of all of them among the cores. A ReLU of
// a pending result and its sum with a tensor that is there become part of
// the product (g.ReLU(l.Forward(g, x)), g.Add(a, l.Forward(g, x))). A
// product that reads another's result runs after it, in a later stage of
// the batch; when a read needs an early stage only, the batch starts
// beside the caller, which goes on once that stage is done while the
// helpers compute the rest — the later layers' conditional norms while the
// first layers run. The values are those of each product computed alone:
// a row's result depends on nothing else in the batch. The products that a
// step applies to the rows of a [Carried] are computed ahead, for the next
// value as soon as it is set, and served reordered to the next step.
//
// Convolutions are deferred the same way on a graph that records nothing
// (see [Graph.Conv2d]): one is computed when it is read, with the batch
// norm in evaluation mode, the residual sum and the ReLU issued on it
// folded in, channels last, its weights packed (Winograd's transform for
// 3×3 windows) once and kept with the weight tensor.
//
// # Devices
//
// A tensor lives on a [Device]: [CPU] (host slices, run by the CPU kernels),
// [Reference] (the reference engine: device-style buffers in Go memory, run
// by the CPU kernels through the same engine interface as a GPU, so that
// the whole device code path is tested on any machine) or [CUDA](n) (with
// the cuda build tag). [Tensor.To] copies a tensor to a device and
// [ToDevice] moves a module's parameters there; ops then run, forward and
// backward, on the device of their operands, and operands on two devices
// are a programmer error ("radgen: Add: operands on cpu and reference").
// Each op is written once, against its device's engine: the CPU is an
// engine like the others, so an op computes the same thing, forward and
// backward, wherever it runs, and a fast path of the CPU (Winograd
// convolutions, fused batch norm, skinny products) is that engine's way
// of running a primitive, not a second version of the op.
// Devices hold float32 only: float64 stays on the CPU for gradient checks.
// A device tensor's storage is freed when the tensor becomes unreachable.
// The tests run on the device RADGEN_DEVICE names (cpu, reference, cuda:N).
//
// Every op has a float64 finite-difference gradient check, and the
// R2Gen model reproduces the published code's intermediate tensors, loss,
// gradients and decoded reports (see memtrans's parity tests).
package radgen
