#!/usr/bin/env bash
# Instruction counts of the CPU backend's forward / backward jobs (job_fwd_pick / job_bwd_pick: the kernels, not the small per-call setup) under callgrind (repeatable, unlike
# timings on a shared machine). One thread, f32, no bias, shape B,D,L,W (default 2,256,1024,4).
# Usage: tests/perf/cpu_callgrind.sh [B,D,L,W]   (after CAUSAL_CONV1D_BACKEND=cpu cargo test --release --lib --no-run;
# set CARGO_TARGET_DIR as for that build)
# CCV1D_CPU_ISA=baseline in the environment measures the baseline (SSE2) instantiation (valgrind has
# no AVX-512, so the default is the AVX2 one).
set -euo pipefail
shape=${1:-2,256,1024,4}
bin=$(ls -t "${CARGO_TARGET_DIR:-target}"/release/deps/causal_conv1d-* | grep -v '\.d$' | head -1)
tmp=$(mktemp -d)
for only in cf cf-silu cl cl-silu; do
  for op in fwd bwd; do
    out=$tmp/$only-$op.cg
    CCV1D_NUM_THREADS=1 CCV1D_BENCH_SHAPE=$shape CCV1D_BENCH_ONLY=$only CCV1D_BENCH_OP=$op CCV1D_BENCH_REPS=1 \
      valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect="*job_${op}_pick" \
      "$bin" --exact cpu::tests::bench_throughput --ignored >/dev/null 2>&1
    ir=$(grep -m1 '^summary:' "$out" | awk '{print $2}')
    # bench calls the op twice (warm-up + 1 rep): report per call
    printf '%-8s %s  Ir/call %12d  Ir/elem %.2f\n' "$only" "$op" $((ir / 2)) "$(echo "$ir / 2 / $(echo $shape | awk -F, '{print $1*$2*$3}')" | bc -l)"
  done
done
rm -rf "$tmp"
