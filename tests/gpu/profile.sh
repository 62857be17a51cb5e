#!/usr/bin/env bash
# Nsight Compute on one kernel launch per bench row (device machine, no Rust needed):
#   BIN=.carry/g bash tests/gpu/profile.sh "PRESET FILTER OP DTYPE LAYOUT" ...
# e.g. "decode B256-state3 update bf16 cf". Prints speed-of-light, occupancy, launch and warp-state
# sections of the first timed launch of the row's main kernel. `--clock-control none`: ncu would
# otherwise lock the GPU's clocks to base while it profiles (the machine's clocks are not ours to set).
set -u
BIN=${BIN:-.carry/g}
export LD_LIBRARY_PATH=$BIN${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for row in "$@"; do
  set -- $row
  echo "=================== $row"
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis -k "regex:ccv1d_(update|step|fwd_c|bwd_c)" --launch-skip 1 --launch-count 1 \
      "$BIN/ccv1d" bench --backend gpu --timing events --warmup 1 --iters 1 --preset "$1" --filter "$2" --op "$3" --dtype "$4" --layout "$5" 2>&1 \
    | grep -vE "^==PROF==|^\s*$|----" | grep -E "ccv1d_|Throughput|Duration|Registers|Achieved Occupancy|Theoretical Occupancy|Block Limit|Shared Memory Config|Dynamic Shared|Static Shared|Warp Cycles Per Issued|Stall|Issued Warp|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth|Grid Size|Waves Per SM|OPT|est. speedup" | cut -c1-160
done
