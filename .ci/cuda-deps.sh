#!/usr/bin/env bash
# .ci/cuda-deps.sh: what `go build -tags cuda ./...` needs on a clean Debian 12
# machine without a GPU, installed in about half a minute.
#
# internal/cuda links against no CUDA library (its shim dlopen()s libcuda and
# libcublas at run time), so the tagged build needs only gcc: no stub
# libraries, no CGO_LDFLAGS. This script adds the CUDA 11.8 headers (cuda.h,
# cublas_v2.h and what they include, from Debian non-free's nvidia-cuda-dev)
# so that the shim's prototypes are checked against NVIDIA's at compile time
# (shim.c, RG_HAVE_CUDA_H), and exports CGO_CFLAGS for them.
#
# The .deb is 774 MB, but the headers are the first 14 MB of its data
# archive: the download takes most of the time (about 25 s here), the
# extraction stops after the headers (about 3 s, instead of 40 s for the whole
# archive). The headers are kept in a cache directory; later runs take no
# time. Where nvidia-cuda-toolkit is installed (CUDA 11.8 in /usr/include),
# its headers are used as they are.
#
# Use:  source .ci/cuda-deps.sh          exports CGO_CFLAGS (and RADGEN_REQUIRE_CUDA_HEADERS=1)
#       .ci/cuda-deps.sh --print-env    installs, then prints the export lines
# Environment:
#   RADGEN_CUDA_PREFIX   cache directory (default $HOME/.cache/radgen/cuda-11.8)
#   RADGEN_CUDA_STRICT=1 fail when the headers cannot be had (default: warn,
#                        and build without the prototype check)

_rg_cuda_deps() {
	local prefix="${RADGEN_CUDA_PREFIX:-${HOME:-/root}/.cache/radgen/cuda-11.8}"
	local inc="$prefix/usr/include"
	local t0=$SECONDS
	if ! command -v gcc >/dev/null 2>&1; then
		echo "cuda-deps: installing gcc (cgo)" >&2
		apt-get install -y -q --no-install-recommends gcc libc6-dev >/dev/null || return 1
	fi
	if [ -f "$inc/cuda.h" ] && [ -f "$inc/cublas_v2.h" ]; then
		echo "cuda-deps: CUDA headers cached in $inc" >&2
		_RG_CUDA_INC="$inc"
		return 0
	fi
	# A machine with nvidia-cuda-toolkit installed (to regenerate the PTX)
	# has the same CUDA 11.8 headers in /usr/include already.
	if [ -z "${RADGEN_CUDA_PREFIX:-}" ] && [ -f /usr/include/cublas_v2.h ] &&
		grep -q '^#define CUDA_VERSION 11080' /usr/include/cuda.h 2>/dev/null; then
		echo "cuda-deps: CUDA 11.8 headers installed in /usr/include" >&2
		_RG_CUDA_INC=/usr/include
		return 0
	fi
	if [ "$(id -u)" != 0 ]; then
		echo "cuda-deps: need root for apt (or set RADGEN_CUDA_PREFIX to a directory holding usr/include/cuda.h)" >&2
		return 1
	fi
	# nvidia-cuda-dev lives in bookworm's non-free component.
	if ! apt-cache policy nvidia-cuda-dev 2>/dev/null | grep -q 'Candidate: [0-9]'; then
		local src=/etc/apt/sources.list.d/radgen-cuda-nonfree.sources
		if [ ! -f "$src" ]; then
			cat >"$src" <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: contrib non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
		fi
		apt-get update -q >/dev/null || return 1
	fi
	local tmp
	tmp=$(mktemp -d) || return 1
	chmod 755 "$tmp" # apt's _apt user writes the download there
	echo "cuda-deps: downloading nvidia-cuda-dev (774 MB) for its headers" >&2
	if ! (cd "$tmp" && apt-get download -q nvidia-cuda-dev >/dev/null 2>"$tmp/err"); then
		cat "$tmp/err" >&2
		rm -rf "$tmp"
		return 1
	fi
	local t1=$SECONDS
	mkdir -p "$prefix"
	# The headers come first in the data archive: stop reading after 48 MB of
	# it (tar then reports the cut-off archive; what it extracted is whole).
	dpkg-deb --fsys-tarfile "$tmp"/nvidia-cuda-dev_*.deb 2>/dev/null | head -c 48000000 |
		tar -x -C "$prefix" --wildcards './usr/include/*' 2>/dev/null
	rm -rf "$tmp"
	local h
	for h in cuda.h cublas_v2.h cublas_api.h driver_types.h cuComplex.h vector_types.h cuda_fp16.h library_types.h; do
		if [ ! -f "$inc/$h" ]; then
			echo "cuda-deps: $h missing after extraction" >&2
			return 1
		fi
	done
	echo "cuda-deps: CUDA 11.8 headers in $inc (download $((t1 - t0)) s, extract $((SECONDS - t1)) s)" >&2
	_RG_CUDA_INC="$inc"
}

_RG_CUDA_INC=
if _rg_cuda_deps; then
	export CGO_ENABLED=1
	export CGO_CFLAGS="-I$_RG_CUDA_INC ${CGO_CFLAGS:--O2 -g}"
	export RADGEN_REQUIRE_CUDA_HEADERS=1
elif [ "${RADGEN_CUDA_STRICT:-0}" = 1 ]; then
	echo "cuda-deps: failed (RADGEN_CUDA_STRICT=1)" >&2
	# shellcheck disable=SC2317
	return 1 2>/dev/null || exit 1
else
	echo "cuda-deps: WARNING: no CUDA headers; the cuda build goes on without the prototype check" >&2
	export CGO_ENABLED=1
fi
unset -f _rg_cuda_deps

if [ "${1:-}" = --print-env ]; then
	echo "export CGO_ENABLED=1"
	[ -n "$_RG_CUDA_INC" ] && echo "export CGO_CFLAGS='$CGO_CFLAGS'" && echo "export RADGEN_REQUIRE_CUDA_HEADERS=1"
fi
true
