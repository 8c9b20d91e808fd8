#!/usr/bin/env bash
# On the lent H200: the real system end to end with the CUDA copy engine.
# Expects prebuilt binaries and their libraries under .carry/gpu/ (built on
# the development machine); writes logs and JSON under $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
export LD_LIBRARY_PATH=$PWD/.carry/gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
bin=.carry/gpu/bin
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
$bin/kvtier --version 2>&1 | tee -a "$out/gpu.txt"
echo "== test_real (real_run.*) on the GPU"
KVTIER_TEST_DEVICE=auto $bin/test_real --gtest_filter='real_run.*' 2>&1 | tee "$out/test_real_run-gpu.txt" | tail -5
echo "== kvtier run, CUDA copy engine"
$bin/kvtier run configs/real-gpu.toml --max-requests 300 --time-scale 0.05 --compute-scale 0.2 --quiet \
  --json-out "$out/run-gpu.json" 2>&1 | tee "$out/run-gpu.txt"
echo "== kvtier run, CPU twin on the same machine"
$bin/kvtier run configs/real-gpu.toml --device cpu --max-requests 300 --time-scale 0.05 --compute-scale 0.2 --quiet \
  --json-out "$out/run-cpu.json" 2>&1 | tee "$out/run-cpu.txt"
rm -rf /tmp/kvtier
