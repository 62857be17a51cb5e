#!/usr/bin/env bash
# Kernel-image variants for tuning (docs/perf.md): sm_90 fatbins of hip/ with some macros of
# hip/instances.h overridden, timed on the device with `ccv1d bench --backend gpu --image FILE`.
#   CUDA_HOME=... bash tests/gpu/build_variants.sh NAME "MACRO=VALUE;MACRO=VALUE" [NAME "..."]...
# e.g. cfmin12 "CCV_LB_fwd_cf_f32(W)=CCV_LAUNCH_BOUNDS_MIN(CCV_NT_fwd_cf, 12)". The overrides go into a
# pre-included header (nvcc splits -D values at commas). Output: .carry/gpu/variants/NAME.fatbin.
# HIP_DIR=DIR builds from another copy of hip/ (a source change timed beside the embedded kernels).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CUDA_HOME:?set CUDA_HOME (nvcc in \$CUDA_HOME/bin)}"
NV=$CUDA_HOME/bin
src=${HIP_DIR:-hip}
inc=()
for d in "$CUDA_HOME"/../*/include; do inc+=(-I "$d"); done
out=.carry/gpu/variants
mkdir -p "$out"
while [ $# -ge 2 ]; do
  name=$1 flags=$2
  shift 2
  d=$(mktemp -d)
  echo "$flags" | tr ';' '\n' | sed -n 's/^ *\([A-Za-z_0-9]*\(([A-Z])\)\{0,1\}\)=\(.*\)$/#define \1 \3/p' > "$d/flags.h"
  for f in "$src"/*.hip; do
    f=$(basename "$f" .hip)
    "$NV/nvcc" -std=c++17 -O3 -rdc=true -cubin -x cu -arch=sm_90 "${inc[@]}" -I "$src" -include "$d/flags.h" \
      "$src/$f.hip" -o "$d/$f.cubin" -Xptxas -v > "$d/$f.log" 2>&1 &
  done
  wait
  "$NV/nvlink" -arch=sm_90 "$d"/*.cubin -o "$d/linked.cubin"
  "$NV/fatbinary" --create="$out/$name.fatbin" --64 --compress-all --image3=kind=elf,sm=90,file="$d/linked.cubin"
  echo "$name -> $out/$name.fatbin (ptxas reports in $d/*.log)"
done
