#!/usr/bin/env bash
# Builds the smoke bundle for run_remote.sh (run from the repository root, on a machine with
# Rust and nvcc): the smoke program, and a libcausal_conv1d.so whose embedded "kernel image" is
# the smoke kernels (cfg ccv1d_cuda forced; a test-only build in target/smoke, so the real build
# is untouched). Once build.rs compiles the real kernels, `cargo build --release` gives a .so for
# torch_smoke.py directly.
#   CUDA_HOME=... bash tests/gpu/smoke/make_bundle.sh <bundle dir>
set -eu
B=${1:?bundle dir}
NVCC=${CUDA_HOME:+$CUDA_HOME/bin/}nvcc
mkdir -p "$B"
$NVCC -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
  -o "$B/smoke_kernels.fatbin" tests/gpu/smoke/smoke_kernels.cu
export RUSTFLAGS="--cfg ccv1d_cuda" CARGO_TARGET_DIR=target/smoke
# A first pass creates OUT_DIR (and fails on the missing image the first time); put the image
# there; build again.
cargo build --release --lib --example gpu_smoke >/dev/null 2>&1 || true
for d in target/smoke/release/build/causal-conv1d-*/out; do cp "$B/smoke_kernels.fatbin" "$d/ccv1d_kernels.fatbin"; done
cargo build --release --lib --example gpu_smoke
cp target/smoke/release/tests/gpu/smoke target/smoke/release/libcausal_conv1d.so "$B/"
cp tests/gpu/smoke/smoke_kernels.cu tests/gpu/smoke/torch_smoke.py tests/gpu/smoke/run_remote.sh "$B/"
ls -la "$B"
