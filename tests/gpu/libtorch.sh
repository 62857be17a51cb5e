#!/usr/bin/env bash
# GPU-machine check of the libtorch C++ example (examples-c/torch_ext): build it with g++ against
# the machine's PyTorch and the library in $CAUSAL_CONV1D_LIB_DIR (default .carry/g, from
# tests/gpu/pack.sh), run it, print one summary line last. Needs no Rust, CMake or network.
# A run without any CUDA case is a failure here (REQUIRE_CUDA=0 accepts CPU-only).
# Logs go to $LOG (default gpu-logs) and, when the device tool's $OUT is set, are copied there.
# Usage (repository root): bash tests/gpu/libtorch.sh
set -u
LOG=${LOG:-gpu-logs}
mkdir -p "$LOG"
export CAUSAL_CONV1D_LIB_DIR=${CAUSAL_CONV1D_LIB_DIR:-.carry/g}
build_log=$LOG/libtorch-build.log run_log=$LOG/libtorch-run.log
finish() {
  [ -n "${OUT:-}" ] && cp "$build_log" "$run_log" "$OUT/" 2>/dev/null
  echo "$1"
  exit "$2"
}

t0=$SECONDS
if ! bash examples-c/torch_ext/build.sh >"$build_log" 2>&1; then
  : >"$run_log"
  tail -n 40 "$build_log"
  finish "libtorch-example FAIL(build) after $((SECONDS - t0))s: see $build_log" 1
fi
build_s=$((SECONDS - t0))
head -n 4 "$build_log"

t1=$SECONDS
timeout 300 examples-c/torch_ext/build/ccv1d_torch 2>&1 | tee "$run_log"
rc=${PIPESTATUS[0]}
passed=$(grep -c ': PASS$' "$run_log")
failed=$(grep -c ': FAIL$' "$run_log")
on_cuda=$(grep -c '^cuda ' "$run_log")
result=PASS
[ "$rc" -ne 0 ] && result="FAIL(rc=$rc)"
[ "$rc" -eq 0 ] && [ "$on_cuda" -eq 0 ] && [ "${REQUIRE_CUDA:-1}" = 1 ] && result="FAIL(no CUDA case ran)" && rc=1
finish "libtorch-example $result: $passed cases passed, $failed failed, $on_cuda of them on CUDA; build ${build_s}s, run $((SECONDS - t1))s" "$rc"
