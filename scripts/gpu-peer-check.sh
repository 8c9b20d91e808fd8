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
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-$root/build-gpu/out}
build=${KVTIER_GPU_BUILD:-/tmp/kvtier-gpu-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out" "$build"
exec > >(tee "$out/gpu-peer-check.log") 2>&1

echo "== machine"
date -u
nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.sm --format=csv || true
nvidia-smi topo -m || true
echo "cores: $(nproc)"; "$cuda/bin/nvcc" --version | tail -1; g++ --version | head -1

echo "== build (sm_90, cmake -DKVTIER_GPU_ONLY=ON)"
start=$(date +%s)
generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DKVTIER_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DKVTIER_GTEST_DIR="${KVTIER_GTEST_DIR:-$root/third_party/googletest}" || { echo "CONFIGURE FAILED"; exit 1; }
targets=(peer_cuda_check bench_peer)
have_tests=0
if grep -q '^KVTIER_GPU_TESTS:INTERNAL=ON' "$build/CMakeCache.txt"; then
  targets+=(test_copy); have_tests=1
else
  echo "no GoogleTest: the CPU twin's tests are not built"
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || { echo "BUILD FAILED"; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

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
