#!/usr/bin/env bash
# The model's CUDA twin on a GPU machine, in one go (sm_90, H100/H200):
# builds through the GPU-only configure (-DKVTIER_GPU_ONLY=ON, as
# scripts/gpu-check.sh), runs the CPU twin's tests, checks the CUDA twin
# against the CPU twin with the tolerances model_cuda_check states, then runs
# the PyTorch baseline (bench/kernels/model_torch_baseline.py: SDPA, decode in
# a CUDA graph) and bench/model on the same shapes, and prints the ratios.
#
#   OUT=dir scripts/gpu-model-check.sh   logs, torch.json, model.{txt,json} go to $OUT
#   KVTIER_GPU_BENCH=0                    checks only
#   KVTIER_MODEL_BENCH_QUICK=1            a few shapes only
#   KVTIER_STREAM_BENCH=0                 leaves out bench/stream (streamed decode, 1M-token moonshot; bf16 and fp8 KV)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_setup gpu-model-check.log

gpu_machine name,driver_version,memory.total,clocks.sm

gpu_configure
targets=(model_cuda_check bench_model bench_stream)
have_tests=0
if gpu_has_tests; then
  targets+=(test_model); have_tests=1
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || { echo "BUILD FAILED"; exit 1; }
gpu_built

status=0
if [ $have_tests = 1 ]; then
  echo "== the CPU twin's tests"
  timeout 120 "$build/tests/kernels/test_model" --gtest_brief=1 2>&1 | tail -3; rc=${PIPESTATUS[0]}; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi
echo "== the CUDA twin against the CPU twin"
timeout 300 "$build/tests/kernels/model_cuda_check"; rc=$?; echo "rc $rc"
[ $rc = 0 ] || status=1

if [ "${KVTIER_GPU_BENCH:-1}" = 1 ]; then
  quick=(); [ "${KVTIER_MODEL_BENCH_QUICK:-0}" = 1 ] && quick=(--quick)
  echo "== PyTorch baseline (same shapes)"
  if python3 -c "import torch; assert torch.cuda.is_available()" 2> /dev/null; then
    python3 -c "import torch; print('torch', torch.__version__)"
    timeout 420 python3 "$root/bench/kernels/model_torch_baseline.py" "$out/torch.json" "${quick[@]}"; rc=$?
    echo "rc $rc"; [ $rc = 0 ] || status=1
  else
    echo "no PyTorch with CUDA here: bench/model runs without its baseline"
  fi
  echo "== bench/model"
  baseline=(); [ -s "$out/torch.json" ] && baseline=(--baseline "$out/torch.json")
  timeout 420 "$build/bench/model" "${baseline[@]}" --json "$out/model.json" "${quick[@]}" | tee "$out/model.txt"
  rc=${PIPESTATUS[0]}; echo "rc $rc"; [ $rc = 0 ] || status=1
fi
if [ "${KVTIER_STREAM_BENCH:-1}" = 1 ]; then
  echo "== bench/stream (decode over KV partly in pinned DRAM; the 1M-token context)"
  timeout 420 "$build/bench/stream" --json "$out/stream.json" | tee "$out/stream.txt"
  rc=${PIPESTATUS[0]}; echo "rc $rc"; [ $rc = 0 ] || status=1
  echo "== bench/stream over float8 KV (the 1M-token context fits HBM)"
  timeout 420 "$build/bench/stream" --kv fp8 --json "$out/stream-fp8.json" | tee "$out/stream-fp8.txt"
  rc=${PIPESTATUS[0]}; echo "rc $rc"; [ $rc = 0 ] || status=1
fi
echo "== done: status $status"
exit $status
