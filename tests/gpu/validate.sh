#!/usr/bin/env bash
# GPU validation sweep, run on the GPU machine from the repository root with the binaries built
# on a Rust machine by tests/gpu/pack.sh (stripped copies of the test executables
# sweep/seeds/validation/huge/causal_conv1d/concurrency/numerics/gpu_faults/gpu_driver, ccv1d and
# libcausal_conv1d.so in $BIN). Every step's log goes to $LOG (default ./gpu-logs; packed into
# $OUT/gpu-logs.tgz when the device tool's $OUT is set); the summary table is printed last.
# Usage: tar xJf .carry/g.tar.xz -C .carry && BIN=.carry/g bash tests/gpu/validate.sh
# STEPS="name ..." runs only the steps named (a re-check after a small kernel change when device
# time is short; the summary lists what ran).
set -u
BIN=${BIN:-.carry/g}
LOG=${LOG:-gpu-logs}
mkdir -p "$LOG"
export CCV1D_TEST_BACKEND=gpu PYTHONUNBUFFERED=1
summary=()
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]] && return 0
  local t0=$SECONDS
  timeout "$limit" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  local res=PASS; [ $rc -ne 0 ] && res="FAIL(rc=$rc)"
  summary+=("$(printf '%-22s %-12s %4ds  %s' "$name" "$res" $((SECONDS - t0)) "$(grep -E 'test result|passed, |RESULT|ERROR SUMMARY|B·D·L' "$LOG/$name.log" | tail -1 | cut -c1-90)")")
  echo "[$((SECONDS))s] $name: $res"
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
step info 30 "$BIN/ccv1d" info
step ccv1d-test-full 60 "$BIN/ccv1d" test --backend gpu --full
step sweep 200 env CCV1D_TEST_CASES=${CASES:-1000} CCV1D_TEST_REPEATS=100 "$BIN/sweep" --test-threads=4 --nocapture
# bwd_cf/bwd_cfw batch-row groups forced to 3 rows per block (CCV1D_BWD_ROWS; the geometry picks them
# only for large shapes): groups of 3 with a shorter last one, skipped rows inside groups
step bwd-row-groups 200 env CCV1D_BWD_ROWS=3 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# every channel-first block at most 1 step (CCV1D_CF_STEPS=1: one tile of one batch row), then at
# most 3 (chunks evened to 3 tiles or fewer, up to 3 rows of a 1-tile chunk): the step caps of
# kernels/geometry.rs (cf_max_steps, fwd_max_steps) on every case
step cf-steps 240 env CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c 'CCV1D_CF_STEPS=1 "$0" test --backend gpu --full --layout cf && CCV1D_CF_STEPS=3 "$0" test --backend gpu --full --layout cf && CCV1D_CF_STEPS=1 "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# the channel-first forward and backward on the warp-span kernels (fwd_cfw, bwd_cfw) wherever
# they can run (every width; ragged last spans; 16-bit W <= 4 backward on bwd_cfw7), then never
# (the tile kernels as before session 8)
step cf-warp-everywhere 200 env CCV1D_CF_WARP=1 CCV1D_CFW7=1 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --layout cf && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
step cf-warp-never 200 env CCV1D_CF_WARP=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --layout cf && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# the channel-first backward on bwd_cfw2 (bwd_cfw in 256-thread blocks) wherever it can run (W <= 4,
# rows without states; by default where each warp walks at least 4 spans)
step cfw2-everywhere 200 env CCV1D_CF_WARP=1 CCV1D_CFW2=1 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cf && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# the channel-first backward on bwd_cfwl (bwd_cfw in spans of 4 vectors a lane) wherever it can run
# (rows without states of at least one long span)
step cfwl-everywhere 200 env CCV1D_CF_WARP=1 CCV1D_CFWL=1 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cf && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# every one-token decode update that fits on the register decode step (`stepv`), then none, then
# stepv without its 16-byte runs of channel-major slots (CCV1D_STEP_RUN=0): the update cases of
# ccv1d test and the sweep, and the update self-tests (f32 and small grids too; with stepv off,
# only gpu_update: gpu_update_stepv requires the kernel)
step stepv-knobs 200 env CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c 'c=$0 s=$1 k=$2 t=gpu::kernels::gputest::gpu_update
  knob() { env "$@" "$c" test --backend gpu --full --op update && env "$@" "$s" --test-threads=4; }
  knob CCV1D_STEPV=1 && CCV1D_STEPV=1 "$k" $t --ignored --test-threads=1 &&
  knob CCV1D_STEP_RUN=0 && CCV1D_STEP_RUN=0 "$k" $t --ignored --test-threads=1 &&
  knob CCV1D_STEPV=0 && CCV1D_STEPV=0 "$k" $t --exact --ignored --test-threads=1' "$BIN/ccv1d" "$BIN/sweep" "$BIN/causal_conv1d"
# the channel-first backward on bwd_pt up to 4096 tokens a channel (where a channel fits)
# (CCV1D_BWD_PT; by default up to 2048 tokens, bf16 4096; 4096 here: f16 with 2 vectors a thread in 256)
step bwd-pt-wide 200 env CCV1D_BWD_PT=4096 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cf && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# the channel-last backward of simple rows on bwd_clw wherever it can run (f32 and every width
# too), then never (bwd_cls also where bwd_clw is the default: 16-bit, W = 3-5); small problems
# too (CCV1D_BWD_PE=0: not on bwd_pe)
step cl-bwd-clw-everywhere 200 env CCV1D_CL_BWD=1 CCV1D_BWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# bwd_clw's halo (CCV1D_CL_BWD=2) on every grid, at every width and dtype it is compiled for:
# segments shorter than the window, ragged row ends, one-wave grids, and the self-test's cases
step cl-bwd-clw-halo 240 env CCV1D_CL_BWD=2 CCV1D_BWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cl && "$1" --test-threads=4 && "$2" gpu::kernels::gputest::gpu_bwd_clw --ignored --test-threads=1' "$BIN/ccv1d" "$BIN/sweep" "$BIN/causal_conv1d"
# bwd_clw in 1024-token chunks (CCV1D_CL_CHUNK=1024; 256-token walks a group), the longest chunks
# its rules take (16-bit SiLU at W = 5-7 on fast-memory devices such as the H200), on every case
step cl-bwd-long-chunks 200 env CCV1D_CL_BWD=1 CCV1D_CL_CHUNK=1024 CCV1D_BWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
step cl-bwd-clw-never 200 env CCV1D_CL_BWD=0 CCV1D_BWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op bwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# the channel-last forward of simple rows on fwd_clw wherever it can run (f32 and every width too),
# then never (fwd_cl also where fwd_clw is the default: 16-bit, W >= 5); small problems too
# (CCV1D_FWD_PE=0: not on fwd_pe)
step cl-fwd-clw-everywhere 200 env CCV1D_CL_FWD=1 CCV1D_FWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op fwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
# fwd_clw's halo (CCV1D_CL_FWD=2: fwd_clw wherever it can run, with the halo on every grid; by
# default only on grids of two waves or more): short and ragged walks, one-wave grids, f32 and
# every width, then `gpu_fwd_clw`'s cases with it
step cl-fwd-clw-halo 200 env CCV1D_CL_FWD=2 CCV1D_FWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op fwd --layout cl && "$1" --test-threads=4 && "$2" gpu::kernels::gputest::gpu_fwd_clw --ignored --test-threads=1' "$BIN/ccv1d" "$BIN/sweep" "$BIN/causal_conv1d"
# fwd_clw in 384-token chunks (CCV1D_CL_CHUNK=384; 96-token walks a group), the longest its rules
# take (16-bit SiLU at W >= 7 on fast-memory devices such as the H200), with its halo, on every case
step cl-fwd-long-chunks 200 env CCV1D_CL_FWD=2 CCV1D_CL_CHUNK=384 CCV1D_FWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op fwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
step cl-fwd-clw-never 200 env CCV1D_CL_FWD=0 CCV1D_FWD_PE=0 CCV1D_TEST_CASES=$(( ${CASES:-1000} / 4 )) CCV1D_TEST_REPEATS=10 sh -c '"$0" test --backend gpu --full --op fwd --layout cl && "$1" --test-threads=4' "$BIN/ccv1d" "$BIN/sweep"
step seeds 60 "$BIN/seeds"
step validation 120 "$BIN/validation" --include-ignored
step huge-2pow31 150 "$BIN/huge" --ignored --nocapture
step kernel-selftest 300 "$BIN/causal_conv1d" gpu::kernels::gputest --ignored --test-threads=1
step concurrency 120 "$BIN/concurrency" --nocapture
step numerics 60 "$BIN/numerics" --nocapture
step gpu-faults 120 "$BIN/gpu_faults" --ignored --test-threads=1 --nocapture
step missing-driver 30 "$BIN/gpu_driver" missing_driver_directory_is_no_device
step torch-ctypes 90 python3 examples-c/torch_ctypes.py "$BIN/libcausal_conv1d.so"
step python-package 570 env BIN="$BIN" LOG="$LOG" OUT= bash tests/gpu/python.sh
step libtorch-example 300 env CAUSAL_CONV1D_LIB_DIR="$BIN" LOG="$LOG" OUT= bash tests/gpu/libtorch.sh
step memcheck 120 compute-sanitizer --tool memcheck --error-exitcode 9 env CCV1D_TEST_CASES=24 CCV1D_TEST_REPEATS=2 "$BIN/sweep" --test-threads=1
step racecheck 100 compute-sanitizer --tool racecheck --error-exitcode 9 env CCV1D_TEST_CASES=8 CCV1D_TEST_REPEATS=2 "$BIN/sweep" --test-threads=1
echo
echo "step                   result       time  last line"
printf '%s\n' "${summary[@]}"
[ -n "${OUT:-}" ] && tar czf "$OUT/gpu-logs.tgz" -C "$LOG" .
