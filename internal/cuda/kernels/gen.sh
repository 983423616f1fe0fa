#!/bin/sh
# Regenerates radgen.ptx from radgen.cu; run through `go generate -tags cuda ./internal/cuda`.
#
# nvcc: Debian 12 non-free's nvidia-cuda-toolkit (CUDA 11.8) or any newer one.
# PTX for compute_52 is JIT-compiled by every newer driver (sm_90 included);
# the first line of the PTX records the sha256 of the .cu it came from, and
# TestPTXMatchesSource fails when the two drift apart.
#
# Environment:
#   NVCC        nvcc to run (default: nvcc)
#   NVCC_FLAGS  extra flags, e.g. "-ccbin /usr/bin/g++ -allow-unsupported-compiler"
#               for CUDA 11.8 on a machine whose only g++ is 12
#   PTXAS       if set, the PTX is also assembled for sm_90 as a check
set -eu
cd "$(dirname "$0")"
NVCC=${NVCC:-nvcc}
# shellcheck disable=SC2086
"$NVCC" ${NVCC_FLAGS:-} -ptx -arch=compute_52 -o radgen.ptx.tmp radgen.cu
sum=$(sha256sum radgen.cu | cut -d' ' -f1)
{ echo "// radgen.cu sha256 $sum"; cat radgen.ptx.tmp; } > radgen.ptx
rm -f radgen.ptx.tmp
if [ -n "${PTXAS:-}" ]; then
	"$PTXAS" -arch=sm_90 -o /dev/null radgen.ptx
fi
echo "kernels/gen.sh: wrote radgen.ptx ($(grep -c '^.visible .entry' radgen.ptx) entry points)"
