#!/usr/bin/env bash
# The Python package (python/) on the GPU machine: torch CUDA tensors through ccv1d, vs float64
# F.conv1d (outputs and gradients), opcheck of the custom ops, torch.compile(fullgraph=True) with
# inductor, side streams; then the same torch tests on the torch<2.4 fallback path
# (CCV1D_TORCH_FALLBACK=1: plain autograd.Function). No network and no Rust needed: the package
# is pip-installed offline (in-tree build backend) into a temp dir, else used via PYTHONPATH.
# Usage, from the repository root: BIN=.carry/g bash tests/gpu/python.sh
# (REQUIRE_CUDA=0 dry-runs the script on a machine without a GPU: CPU tests only.)
# Logs: $LOG (default ./gpu-logs) and, under the device tool, $OUT/python-*.log.
set -u
REQUIRE_CUDA=${REQUIRE_CUDA:-1}
BIN=${BIN:-.carry/g}
LOG=${LOG:-gpu-logs}
mkdir -p "$LOG"
LIB=$(realpath "$BIN/libcausal_conv1d.so") || { echo "FAIL: no $BIN/libcausal_conv1d.so"; exit 1; }
export CAUSAL_CONV1D_LIB=$LIB PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
[ "$REQUIRE_CUDA" = 0 ] || python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" || { echo "FAIL: torch sees no CUDA device"; exit 1; }
python3 -c "import numpy; print('numpy', numpy.__version__)" || echo "note: numpy missing: test_numpy and the update/varlen torch tests will be skipped (loudly)"

site=$(mktemp -d)
if python3 -m pip install -q --no-deps --no-index --no-build-isolation --target "$site" ./python >"$LOG/python-pip.log" 2>&1; then
  export PYTHONPATH=$site CCV1D_TEST_USE_INSTALLED=1
  echo "testing the pip-installed copy in $site"
else
  export PYTHONPATH=$PWD/python
  echo "pip install failed (see $LOG/python-pip.log): testing python/ through PYTHONPATH"
fi
python3 -c "import ccv1d; print('ccv1d from', ccv1d.__file__, '| library', ccv1d.version(), sorted(ccv1d.backends_compiled()))" || exit 1

summary=()
suite() {  # suite NAME [ENV=VAL...]
  local name=$1; shift
  local t0=$SECONDS
  env "$@" timeout 280 python3 -m unittest discover -s python/tests -v >"$LOG/python-$name.log" 2>&1
  local rc=$?
  local res=PASS; [ $rc -ne 0 ] && res="FAIL(rc=$rc)"
  local cuda_ok; cuda_ok=$(grep -c "CudaStreams.test_side_stream_and_workspace) ... ok" "$LOG/python-$name.log")
  [ "$cuda_ok" = 1 ] || [ "$REQUIRE_CUDA" = 0 ] || res="FAIL(cuda tests did not run)"
  summary+=("$(printf '%-10s %-28s %4ds  %s | skipped: %s' "$name" "$res" $((SECONDS - t0)) \
    "$(grep -E '^(Ran|OK|FAILED)' "$LOG/python-$name.log" | tr '\n' ' ')" \
    "$(grep -c 'skipped' "$LOG/python-$name.log")")")
  echo "[$SECONDS s] $name: $res"
  [ -n "${OUT:-}" ] && cp "$LOG/python-$name.log" "$OUT/"
}
suite custom-op
suite fallback CCV1D_TORCH_FALLBACK=1
echo
echo "suite      result                       time  tests"
printf '%s\n' "${summary[@]}"
grep -hE "^(FAIL|ERROR):|skipped '" "$LOG"/python-custom-op.log "$LOG"/python-fallback.log | sort | uniq -c
printf '%s\n' "${summary[@]}" | grep -q FAIL && exit 1
exit 0
