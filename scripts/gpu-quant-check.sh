#!/usr/bin/env bash
# On a GPU machine: builds the quantization kernels standalone (no CAF, toml++,
# fmt or gtest needed), checks them against the CPU twin byte for byte, and
# runs bench_quant. Logs and JSON go to $OUT (default: ./gpu-quant-out).
#   bash scripts/gpu-quant-check.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/gpu-quant-out}
build=${KVTIER_GPU_BUILD:-/tmp/kvtier-quant-gpu}
mkdir -p "$out"
log=$out/quant-h200.txt
{
  echo "== $(date -u +%FT%TZ) kvtier quantization on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
  nvcc --version | tail -1
  cmake -S "$root/scripts/gpu-quant" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null &&
    cmake --build "$build" -j16 2>&1 | grep -E "error|registers|spill|bytes stack|Linking" | sed 's/^ *//'
  echo "== CUDA kernels vs CPU twin"
  "$build/quant_cuda_check"
  echo "check exit: $?"
  echo "== bench_quant (GPU; tile 8192 x 256 x 128 fp16 = 512 MiB)"
  "$build/bench_quant" --gpu-only --reps 30 --json "$out/quant-h200.json"
  echo "bench exit: $?"
} 2>&1 | tee "$log"
