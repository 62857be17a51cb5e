#!/usr/bin/env bash
# Build examples-c/torch_ext/ccv1d_torch.cpp with g++ against the PyTorch that python3 imports
# (its include/ and lib/) and libcausal_conv1d.so. No CMake, no Rust, no network.
# Usage (from anywhere): examples-c/torch_ext/build.sh   ->  examples-c/torch_ext/build/ccv1d_torch
# Environment (all optional):
#   CAUSAL_CONV1D_LIB_DIR  directory with libcausal_conv1d.so (default: .carry/gpu, else target/release)
#   TORCH_DIR              the torch package directory (default: asked from python3)
#   TORCH_CXX11_ABI        0 or 1 (default: torch._C._GLIBCXX_USE_CXX11_ABI, else read off libc10.so)
#   CUDA_INCLUDE           directory with cuda_runtime_api.h (default: torch's pip CUDA runtime
#                          headers when complete, else $CUDA_HOME/include, nvcc's include/, /usr/local/cuda/include)
#   CXX (g++), CXX_STD (c++20 when the headers demand it, else c++17), BUILD_DIR (examples-c/torch_ext/build)
#   COMPILE_ONLY=1         compile to an object file and stop (no libraries needed)
#   LINK_EXTRA             appended to the link line (e.g. -Wl,--allow-shlib-undefined where
#                          the CUDA libraries libtorch_cuda.so needs are absent: link check only)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
die() { echo "build.sh: $*" >&2; exit 1; }

CXX=${CXX:-g++}
build=${BUILD_DIR:-$here/build}
mkdir -p "$build"

# --- PyTorch: package directory and C++ ABI -----------------------------------------------------
if [ -z "${TORCH_DIR:-}" ]; then
  TORCH_DIR=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))') ||
    die "python3 cannot import torch; set TORCH_DIR to the torch package directory"
  : "${TORCH_CXX11_ABI:=$(python3 -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')}"
fi
[ -f "$TORCH_DIR/include/torch/csrc/api/include/torch/torch.h" ] || die "no torch C++ headers under $TORCH_DIR/include"
if [ -z "${TORCH_CXX11_ABI:-}" ]; then
  # libc10.so exports std::__cxx11:: names only when built with the new ABI (grep -c reads all of
  # nm's output: grep -q would stop early, and nm's SIGPIPE would fail the pipeline).
  if nm -D --defined-only "$TORCH_DIR/lib/libc10.so" 2>/dev/null | grep -c __cxx11 >/dev/null; then TORCH_CXX11_ABI=1; else TORCH_CXX11_ABI=0; fi
fi

# --- CUDA runtime headers (c10/cuda/CUDAStream.h includes cuda_runtime_api.h) -------------------
cuda_candidates=()
[ -n "${CUDA_INCLUDE:-}" ] && cuda_candidates+=("$CUDA_INCLUDE")
site=$(dirname "$TORCH_DIR")
cuda_candidates+=("$site"/nvidia/cu1*/include "$site/nvidia/cuda_runtime/include")
[ -n "${CUDA_HOME:-}" ] && cuda_candidates+=("$CUDA_HOME/include")
command -v nvcc >/dev/null && cuda_candidates+=("$(dirname "$(command -v nvcc)")/../include")
cuda_candidates+=(/usr/local/cuda/include)
cuda_inc=
for d in "${cuda_candidates[@]}"; do
  # a complete tree: pip runtime wheels may lack crt/ (nvidia-cuda-crt is a separate wheel)
  if [ -f "$d/cuda_runtime_api.h" ] && [ -f "$d/crt/host_defines.h" ]; then cuda_inc=$(cd "$d" && pwd); break; fi
done
[ -n "$cuda_inc" ] || die "no cuda_runtime_api.h found (tried: ${cuda_candidates[*]}); set CUDA_INCLUDE"

# Recent libtorch refuses anything before C++20; older releases are C++17 code.
if [ -z "${CXX_STD:-}" ]; then
  CXX_STD=c++17
  grep -qs 'C++20 or later' "$TORCH_DIR/include/torch/csrc/api/include/torch/all.h" && CXX_STD=c++20
fi

echo "torch:      $TORCH_DIR (_GLIBCXX_USE_CXX11_ABI=$TORCH_CXX11_ABI, -std=$CXX_STD)"
echo "CUDA incl.: $cuda_inc"

cxxflags=(-std="$CXX_STD" -O1 -Wall -Wno-unused-parameter "-D_GLIBCXX_USE_CXX11_ABI=$TORCH_CXX11_ABI"
  -I "$root/include"
  -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" -isystem "$cuda_inc")
obj=$build/ccv1d_torch.o
t0=$SECONDS
"$CXX" "${cxxflags[@]}" -c "$here/ccv1d_torch.cpp" -o "$obj"
echo "compiled $obj in $((SECONDS - t0)) s"
[ "${COMPILE_ONLY:-0}" = 1 ] && exit 0

# --- libcausal_conv1d: the loader looks for the SONAME libcausal_conv1d.so.0, which a build
# directory (target/release, .carry/gpu) does not have: link through a private directory that has it.
lib_dir=${CAUSAL_CONV1D_LIB_DIR:-}
if [ -z "$lib_dir" ]; then
  for d in "$root/.carry/gpu" "$root/target/release"; do
    [ -f "$d/libcausal_conv1d.so" ] && { lib_dir=$d; break; }
  done
fi
[ -n "$lib_dir" ] && [ -f "$lib_dir/libcausal_conv1d.so" ] ||
  die "no libcausal_conv1d.so (set CAUSAL_CONV1D_LIB_DIR; looked in .carry/gpu and target/release)"
so=$(cd "$lib_dir" && pwd)/libcausal_conv1d.so
so=$(readlink -f "$so")
mkdir -p "$build/lib"
ln -sfn "$so" "$build/lib/libcausal_conv1d.so"
ln -sfn "$so" "$build/lib/libcausal_conv1d.so.0"
echo "library:    $so"

# libtorch_cuda is only reached through static registration: --no-as-needed keeps it (and its
# CUDA backend) loaded even though no symbol of it is referenced directly.
"$CXX" "$obj" -o "$build/ccv1d_torch" \
  -L "$build/lib" -Wl,-rpath,"$build/lib" -lcausal_conv1d \
  -L "$TORCH_DIR/lib" -Wl,-rpath,"$TORCH_DIR/lib" \
  -Wl,--no-as-needed -ltorch -ltorch_cpu -ltorch_cuda -lc10 -lc10_cuda -Wl,--as-needed \
  ${LINK_EXTRA:-}
echo "built $build/ccv1d_torch"
