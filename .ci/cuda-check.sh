#!/usr/bin/env bash
# .ci/cuda-check.sh: the CUDA acceptance that runs without a GPU.
#   1. go build -tags cuda ./... && go vet -tags cuda ./...   (with CUDA 11.8's
#      headers from .ci/cuda-deps.sh, so the shim's prototypes are checked)
#   2. go test -tags cuda ./internal/cuda: the engine's unit tests run (the
#      allocator, tensor plumbing, PTX/source agreement, "no GPU" is an error
#      and not an exit); the GPU tests skip.
#   3. the default build has no cgo: no package of the module, nor any
#      non-standard dependency, has cgo files without the cuda tag.
#   4. the kernels of internal/cuda/kernels/radgen.cu run on the CPU under a
#      small SIMT emulation (emu_simt.h) against double-precision references.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
# shellcheck source=cuda-deps.sh
source .ci/cuda-deps.sh
t1=$SECONDS
go build -tags cuda ./...
go vet -tags cuda ./...
go test -tags cuda -count=1 ./internal/cuda/
cgo=$(go list -deps -f '{{if and (not .Standard) .CgoFiles}}{{.ImportPath}}{{end}}' ./...)
if [ -n "$cgo" ]; then
	echo "cuda-check: the default build uses cgo in: $cgo" >&2
	exit 1
fi
emu=$(mktemp -d)
g++ -std=c++20 -O1 -w -pthread -o "$emu/emu" internal/cuda/kernels/emu_check.cpp
if ! "$emu/emu" >"$emu/log"; then
	cat "$emu/log" >&2
	exit 1
fi
echo "cuda-check: kernels under SIMT emulation: $(tail -1 "$emu/log")"
rm -rf "$emu"
echo "cuda-check: ok (deps $((t1 - t0)) s, build+vet+test $((SECONDS - t1)) s)"
