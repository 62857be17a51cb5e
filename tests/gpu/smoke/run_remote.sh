#!/usr/bin/env bash
# Runs the driver-layer smoke checks on a GPU machine (no Rust needed there).
#   bash run_remote.sh <bundle dir>
# The bundle holds what make_bundle.sh built here: gpu_smoke, libcausal_conv1d.so (with a CUDA
# image embedded), smoke_kernels.cu, torch_smoke.py. Each step prints PASS/FAIL lines and a
# RESULT line; the script's exit status is the number of steps that failed.
set -u
B=${1:?bundle dir}
fails=0
step() { echo "=== $*"; "$@"; local rc=$?; echo "=== rc=$rc"; [ $rc -eq 0 ] || fails=$((fails + 1)); }

nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader || true
K=/tmp/ccv1d_smoke_kernels.fatbin
# Compile the test kernels on the machine itself (checks the source with its nvcc); fall back to
# the fatbin built with the bundle.
if command -v nvcc >/dev/null && nvcc -fatbin -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=sm_80 \
     -o $K "$B/smoke_kernels.cu"; then echo "kernels: built with $(nvcc --version | tail -1)"; else K="$B/smoke_kernels.fatbin"; fi

step "$B/gpu_smoke" $K
step env CCV1D_SYNC_CHECK=1 "$B/gpu_smoke" $K --fault
echo "=== missing driver (expect NO_DEVICE, status 20, naming /nonexistent)"
CCV1D_DRIVER_DIR=/nonexistent "$B/gpu_smoke" $K | grep -q "status 20.*/nonexistent" && echo "PASS CCV1D_DRIVER_DIR=/nonexistent -> NO_DEVICE" || { echo "FAIL CCV1D_DRIVER_DIR"; fails=$((fails + 1)); }
step python3 "$B/torch_smoke.py" "$B/libcausal_conv1d.so"
if command -v compute-sanitizer >/dev/null; then
  step compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$B/gpu_smoke" $K
fi
echo "=== steps failed: $fails"
exit $fails
