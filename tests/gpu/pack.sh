#!/usr/bin/env bash
# Builds, on a machine without a GPU, what tests/gpu/validate.sh and tests/gpu/bench.sh run on the
# GPU machine, and packs it for the device tool:
#   CUDA_HOME=... bash tests/gpu/pack.sh            # -> .carry/g.tar.xz (holds g/)
# The test executables (sweep seeds validation huge causal_conv1d concurrency numerics gpu_faults
# gpu_driver), ccv1d and libcausal_conv1d.so are built for NVIDIA only
# (CAUSAL_CONV1D_BACKEND=cuda, CAUSAL_CONV1D_CUDA_ARCHS, default 90), stripped and packed with xz:
# stripped they are about 90 MiB, over the device tool's 64 MiB carry limit; packed about 9 MB.
# On the GPU machine:
#   tar xJf .carry/g.tar.xz -C .carry && BIN=.carry/g bash tests/gpu/validate.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CUDA_HOME:?set CUDA_HOME (nvcc in \$CUDA_HOME/bin)}"
out=${PACK_DIR:-.carry}
export CAUSAL_CONV1D_BACKEND=cuda CAUSAL_CONV1D_CUDA_ARCHS=${CAUSAL_CONV1D_CUDA_ARCHS:-90}
json=$(mktemp)
trap 'rm -f "$json"' EXIT
cargo test --release --no-run --message-format=json > "$json"
cargo build --release
rm -rf "$out/g" "$out/g.tar.xz"
mkdir -p "$out/g"
python3 - "$json" "$out/g" <<'PY'
import json, shutil, sys
want = {"sweep", "seeds", "validation", "huge", "causal_conv1d", "concurrency", "numerics", "gpu_faults", "gpu_driver"}
got = set()
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    t = m.get("target", {})
    if m.get("reason") == "compiler-artifact" and m.get("executable") and t.get("name") in want and m["profile"]["test"]:
        shutil.copy(m["executable"], f"{sys.argv[2]}/{t['name']}")
        got.add(t["name"])
if got != want:
    sys.exit(f"pack.sh: test executables missing: {sorted(want - got)}")
PY
cp target/release/ccv1d target/release/libcausal_conv1d.so "$out/g/"
strip "$out/g"/*
# a dictionary larger than two binaries: their embedded kernel images compress against each other
# (at -6, 8 MiB, binaries past 8 MiB packed 2.4x larger)
tar cf - -C "$out" g | xz -6 --lzma2=dict=64MiB -T1 > "$out/g.tar.xz"
echo "$out/g.tar.xz: $(du -h "$out/g.tar.xz" | cut -f1) ($(ls "$out/g" | wc -l) files)"
