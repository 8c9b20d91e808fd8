#!/usr/bin/env bash
# Builds and runs the copy engine's GPU tests and bench/transfer on a CUDA
# machine, in one go, for sm_90 (H100/H200).
#
# It builds through the project's GPU-only configure (-DKVTIER_GPU_ONLY=ON,
# cmake/KvtierGpuOnly.cmake): the GPU machine has the CUDA toolkit and CMake
# but not CAF, TOML++ or fmt, and the pieces run here (kvtier_copy_core, its
# tests, bench/transfer) need none of them. GoogleTest comes from the system,
# or from its sources (a copy of /usr/src/googletest) in $KVTIER_GTEST_DIR,
# default third_party/googletest.
#
#   OUT=dir scripts/gpu-check.sh      logs + transfer.{txt,json} go to $OUT
#   KVTIER_GPU_BENCH=0                 tests only, no bench/transfer
#   KVTIER_OFFLOAD_BENCH=0             no bench/offload (quantize-on-offload)
#   KVTIER_GPU_TEST_TIMEOUT=seconds    per test binary (default 240)
#   KVTIERD=path                       also run client_cuda_check (a CUDA client of kvtierd:
#                                      registered region, HBM <-> region by DMA) against this
#                                      kvtierd binary, built elsewhere (this build has no daemon)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_setup gpu-check.log

gpu_machine name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.sm

gpu_configure
targets=(bench_transfer bench_offload client_cuda_check)
have_tests=0
if gpu_has_tests; then
  targets+=(test_copy test_copy_cuda); have_tests=1
else
  echo "no GoogleTest: tests are not built"
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || { echo "BUILD FAILED"; exit 1; }
gpu_built

status=0
if [ $have_tests = 1 ]; then
  echo "== tests: the mover tests against the GPU mover"
  timeout "${KVTIER_GPU_TEST_TIMEOUT:-240}" "$build/tests/kernels/test_copy_cuda" > "$out/test_copy_cuda.txt" 2>&1; rc=$?
  grep -vE "^\[ +(RUN|OK) +\]" "$out/test_copy_cuda.txt" | tail -40; echo "rc $rc"
  # A broken bulk-copy kernel could hang the bench: leave it out then.
  [ $rc = 0 ] || { status=1; export KVTIER_BENCH_BULK=0; }
  echo "== tests: the same against the CPU twin, and planning"
  timeout 120 "$build/tests/kernels/test_copy" --gtest_brief=1 > "$build/twin.txt" 2>&1; rc=$?
  tail -3 "$build/twin.txt"; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi

if [ -n "${KVTIERD:-}" ]; then
  echo "== client_cuda_check (a CUDA client of $KVTIERD)"
  dir=$(mktemp -d)
  printf '[daemon]\nsocket = "%s/kvtierd.sock"\nmetrics = ""\nblock_bytes = "2MiB"\n[dram]\nbytes = "1GiB"\n[[tenant]]\nname = "engine"\ntoken = "t"\n' \
    "$dir" > "$dir/kvtierd.toml"
  "$KVTIERD" "$dir/kvtierd.toml" > "$dir/kvtierd.log" 2>&1 &
  daemon=$!
  for _ in $(seq 300); do [ -S "$dir/kvtierd.sock" ] && break; sleep 0.1; done # it faults its DRAM in first
  timeout 120 "$build/tests/kernels/client_cuda_check" "$dir/kvtierd.sock" engine t 256 | tee "$out/client_cuda_check.txt"; rc=${PIPESTATUS[0]}
  kill -TERM $daemon; wait $daemon; echo "rc $rc (kvtierd exit $?)"
  [ $rc = 0 ] || { status=1; tail -5 "$dir/kvtierd.log"; }
  rm -rf "$dir"
fi

if [ "${KVTIER_OFFLOAD_BENCH:-1}" = 1 ]; then
  echo "== bench/offload (quantize-on-offload against the raw mover)"
  timeout 300 "$build/bench/offload" --json "$out/offload.json" > "$out/offload.txt" 2>&1; rc=$?
  cat "$out/offload.txt"; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi

if [ "${KVTIER_GPU_BENCH:-1}" = 1 ]; then
  echo "== bench/transfer"
  timeout 420 "$build/bench/transfer" --json "$out/transfer.json" > "$out/transfer.txt" 2>&1; rc=$?
  cat "$out/transfer.txt"; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi

if [ "${KVTIER_SANITIZE_GPU:-1}" = 1 ] && command -v compute-sanitizer > /dev/null && [ $have_tests = 1 ]; then
  echo "== compute-sanitizer memcheck on the GPU mover tests"
  timeout "${KVTIER_GPU_TEST_TIMEOUT:-150}" compute-sanitizer --tool memcheck --leak-check no "$build/tests/kernels/test_copy_cuda" \
    --gtest_filter='*keeps_every_byte*:*layer_range*:*many_threads*:*split*' 2>&1 | tail -6
fi
echo "== done: status $status"
exit $status
