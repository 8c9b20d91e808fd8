#!/usr/bin/env bash
# On a GPU machine: builds the quantization kernels through the project's
# GPU-only configure (-DKVTIER_GPU_ONLY=ON: no CAF, TOML++ or fmt needed),
# checks them against the CPU twin byte for byte, and runs bench_quant.
# Logs and JSON go to $OUT (default: ./gpu-quant-out).
#   bash scripts/gpu-quant-check.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${OUT:-$root/gpu-quant-out}
build=${KVTIER_GPU_BUILD:-/tmp/kvtier-quant-gpu}
mkdir -p "$out"
log=$out/quant-h200.txt
generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
{
  echo "== $(date -u +%FT%TZ) kvtier quantization on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1)"
  nvcc --version | tail -1
  # -Xptxas=-v: the kernels' register and spill counts go to the log.
  cmake -S "$root" -B "$build" "${generator[@]}" -DKVTIER_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_FLAGS=-Xptxas=-v >/dev/null &&
    cmake --build "$build" -j "$(nproc)" --target quant_cuda_check bench_quant 2>&1 |
      grep -E "error|registers|spill|bytes stack|Linking" | sed 's/^ *//'
  echo "== CUDA kernels vs CPU twin"
  "$build/tests/kernels/quant_cuda_check"
  echo "check exit: $?"
  echo "== bench_quant (GPU; tile 8192 x 256 x 128 fp16 = 512 MiB)"
  "$build/bench/bench_quant" --gpu-only --reps 30 --json "$out/quant-h200.json"
  echo "bench exit: $?"
} 2>&1 | tee "$log"
