#!/usr/bin/env bash
# The GPU performance run behind docs/perf.md, on the device machine (no Rust needed):
#   BIN=.carry/g bash tests/gpu/bench.sh   (binaries from tests/gpu/pack.sh)
# ccv1d info, then `ccv1d bench --backend gpu --preset all` (graph replay, copy ceiling from the
# driver memcpy and the copy kernel) with JSON/CSV/log in $LOG (./gpu-logs), copied to $OUT. Optional
# VARIANTS="name ..." times $VARIANT_DIR/<name>.fatbin kernel images (default .carry/gpu/variants,
# where tests/gpu/build_variants.sh writes them) (tuning builds, see
# docs/perf.md) on the rows named by VARIANT_ARGS, beside the embedded kernels.
set -u
BIN=${BIN:-.carry/g}
LOG=${LOG:-gpu-logs}
mkdir -p "$LOG"
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader || true
"$BIN/ccv1d" info
t0=$SECONDS
"$BIN/ccv1d" bench --backend gpu --preset "${PRESET:-all}" --json "$LOG/bench.json" --csv "$LOG/bench.csv" ${BENCH_ARGS:-} > "$LOG/bench.txt" 2> "$LOG/bench.err"
rc=$?
echo "bench rc=$rc in $((SECONDS - t0)) s"
for v in ${VARIANTS:-}; do
  "$BIN/ccv1d" bench --backend gpu --image "${VARIANT_DIR:-.carry/gpu/variants}/$v.fatbin" ${VARIANT_ARGS:---preset mamba} --csv "$LOG/variant-$v.csv" > "$LOG/variant-$v.txt" 2>/dev/null
  echo "variant $v rc=$?"
done
for v in ${VARIANTS:-}; do
  echo "== variant $v"; grep -E "^\s*(mamba|decode|seed)" "$LOG/variant-$v.txt" | head -40
done
cat "$LOG/bench.txt"
if [ -n "${OUT:-}" ]; then
  cp "$LOG"/bench.txt "$LOG"/bench.json "$LOG"/bench.csv "$OUT"/ 2>/dev/null
  tar czf "$OUT/bench-logs.tgz" -C "$LOG" . 2>/dev/null
fi
exit $rc
