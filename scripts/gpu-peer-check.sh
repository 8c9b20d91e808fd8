#!/usr/bin/env bash
# GPU to GPU on a two-GPU machine, in one go (sm_90, H100/H200): builds
# through the GPU-only configure (-DKVTIER_GPU_ONLY=ON, as
# scripts/gpu-check.sh), runs the peer copier's CPU twin tests where
# GoogleTest is found, then peer_cuda_check (prefill on GPU 0, blocks moved to
# GPU 1 by peer copies, decode there against GPU 0: exit 0 only if every
# moved block and every decoded token match), then bench/peer (scattered
# peer copies against one contiguous cudaMemcpyPeer; prefill end -> first
# token on GPU 1 at 4k and 32k tokens).
#
#   OUT=dir scripts/gpu-peer-check.sh   logs, peer.{txt,json} go to $OUT
#   KVTIER_GPU_BENCH=0                  the check only
#   KVTIER_PEER_BENCH_ARGS="..."        arguments for bench/peer (default: none)
#   KVTIER_PEER_ONE_GPU=1               a rehearsal on one GPU: both sides on GPU 0 (all but the link)
#   KVTIER_PEER_SANITIZE=1              also run the check under compute-sanitizer (memcheck; slow)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/gpu-common.sh"
gpu_setup gpu-peer-check.log

gpu_machine index,name,driver_version,memory.total,clocks.sm
nvidia-smi topo -m || true

gpu_configure
targets=(peer_cuda_check bench_peer)
have_tests=0
if gpu_has_tests; then
  targets+=(test_copy); have_tests=1
else
  echo "no GoogleTest: the CPU twin's tests are not built"
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || { echo "BUILD FAILED"; exit 1; }
gpu_built

status=0
if [ $have_tests = 1 ]; then
  echo "== the peer copier's CPU twin and planning"
  timeout 120 "$build/tests/kernels/test_copy" --gtest_filter='copy_peer.*' --gtest_brief=1 2>&1 | tail -3
  rc=${PIPESTATUS[0]}; echo "rc $rc"; [ $rc = 0 ] || status=1
fi
echo "== peer_cuda_check (prefill on GPU 0, decode on GPU 1)"
timeout 300 "$build/tests/kernels/peer_cuda_check" | tee "$out/peer_cuda_check.txt"; rc=${PIPESTATUS[0]}
echo "rc $rc"; [ $rc = 0 ] || status=1
if [ "${KVTIER_PEER_SANITIZE:-0}" = 1 ]; then
  echo "== peer_cuda_check under compute-sanitizer"
  timeout 300 "$cuda/bin/compute-sanitizer" --error-exitcode 3 "$build/tests/kernels/peer_cuda_check" \
    > "$out/peer_cuda_check.sanitizer.txt" 2>&1; rc=$?
  tail -5 "$out/peer_cuda_check.sanitizer.txt"; echo "rc $rc"; [ $rc = 0 ] || status=1
fi

if [ "${KVTIER_GPU_BENCH:-1}" = 1 ]; then
  echo "== bench/peer"
  # shellcheck disable=SC2086 # the arguments are meant to split
  timeout 420 "$build/bench/peer" ${KVTIER_PEER_BENCH_ARGS:-} --json "$out/peer.json" > "$out/peer.txt" 2>&1; rc=$?
  cat "$out/peer.txt"; echo "rc $rc"; [ $rc = 0 ] || status=1
fi
echo "== done: status $status"
exit $status
