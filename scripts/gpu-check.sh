#!/usr/bin/env bash
# Builds and runs the copy engine's GPU tests and bench/transfer on a CUDA
# machine, in one go, for sm_90 (H100/H200).
#
# It compiles with nvcc and g++ directly, not through the project's CMake:
# the GPU machine has the CUDA toolkit but not CAF, TOML++ or fmt, and the
# pieces run here (kvtier_copy_core, its tests, the bench) need none of them.
# GoogleTest comes from the system, or from its sources (a copy of
# /usr/src/googletest) in $KVTIER_GTEST_DIR, default third_party/googletest.
#
#   OUT=dir scripts/gpu-check.sh      logs + transfer.{txt,json} go to $OUT
#   KVTIER_GPU_BENCH=0                 tests only, no bench/transfer
#   KVTIER_GPU_TEST_TIMEOUT=seconds    per test binary (default 240)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
out=${OUT:-$root/build-gpu/out}
build=${KVTIER_GPU_BUILD:-/tmp/kvtier-gpu-build}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out" "$build"
exec > >(tee "$out/gpu-check.log") 2>&1

echo "== machine"
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current,clocks.sm --format=csv || true
echo "cores: $(nproc)"; "$cuda/bin/nvcc" --version | tail -1; g++ --version | head -1

defs=""; libs="-L$cuda/lib64 -Wl,-rpath,$cuda/lib64 -lcudart"
if ls "$cuda"/lib64/libcublas.so* > /dev/null 2>&1; then defs="-DKVTIER_HAVE_CUBLAS"; libs="$libs -lcublas"; fi
cxx="g++ -std=c++20 -O2 -g -Wall -Wextra -Wno-missing-field-initializers -pthread -I$root -I$cuda/include"

gtest_inc=""; gtest_objs=""
if [ -z "${KVTIER_GTEST_FROM_SOURCE:-}" ] && [ -f /usr/include/gtest/gtest.h ] && ls /usr/lib/*/libgtest.a /usr/lib/libgtest.a > /dev/null 2>&1; then
  gtest_objs="-lgtest -lgtest_main"
elif [ -d "${KVTIER_GTEST_DIR:-$root/third_party/googletest}/googletest" ]; then
  g="${KVTIER_GTEST_DIR:-$root/third_party/googletest}/googletest"
  gtest_inc="-I$g/include"
  $cxx -w -I"$g/include" -I"$g" -c "$g/src/gtest-all.cc" -o "$build/gtest-all.o" &
  $cxx -w -I"$g/include" -I"$g" -c "$g/src/gtest_main.cc" -o "$build/gtest_main.o" &
  gtest_objs="$build/gtest-all.o $build/gtest_main.o"
else
  echo "no GoogleTest: tests are not built"
fi

echo "== build (sm_90)"
start=$(date +%s)
"$cuda/bin/nvcc" -std=c++17 -arch=sm_90 -O3 -lineinfo $defs -I"$root" -c kernels/copy/cuda/copy_kernels.cu -o "$build/copy_kernels.o" &
core=""
for f in kernels/copy/copy_plan.cpp kernels/copy/cpu_mover.cpp kernels/copy/mover.cpp kernels/copy/worker_pool.cpp \
         kernels/copy/cuda/calibration.cpp kernels/copy/cuda/cuda_baselines.cpp kernels/copy/cuda/cuda_support.cpp \
         kernels/copy/cuda/gpu_mover.cpp kernels/copy/cuda/lane.cpp kernels/copy/cuda/lane_issue.cpp; do
  o="$build/$(basename "$f" .cpp).o"; core="$core $o"
  $cxx -c "$f" -o "$o" &
done
$cxx $gtest_inc -DKVTIER_COPY_TEST_CUDA=1 -c tests/kernels/copy_mover_test.cpp -o "$build/mover_test_cuda.o" &
$cxx $gtest_inc -c tests/kernels/copy_mover_test.cpp -o "$build/mover_test_twin.o" &
$cxx $gtest_inc -c tests/kernels/copy_plan_test.cpp -o "$build/plan_test.o" &
$cxx -c bench/kernels/copy_transfer.cpp -o "$build/transfer.o" &
fail=0; for job in $(jobs -p); do wait "$job" || fail=1; done
[ $fail = 0 ] || { echo "BUILD FAILED"; exit 1; }
core="$core $build/copy_kernels.o"
$cxx -o "$build/transfer" "$build/transfer.o" $core $libs || exit 1
if [ -n "$gtest_objs" ]; then
  $cxx -o "$build/test_copy_cuda" "$build/mover_test_cuda.o" $core $gtest_objs $libs || exit 1
  $cxx -o "$build/test_copy_twin" "$build/mover_test_twin.o" "$build/plan_test.o" $core $gtest_objs $libs || exit 1
fi
echo "built in $(( $(date +%s) - start )) s"

status=0
if [ -n "$gtest_objs" ]; then
  echo "== tests: the mover tests against the GPU mover"
  timeout "${KVTIER_GPU_TEST_TIMEOUT:-240}" "$build/test_copy_cuda" > "$out/test_copy_cuda.txt" 2>&1; rc=$?
  grep -vE "^\[ +(RUN|OK) +\]" "$out/test_copy_cuda.txt" | tail -40; echo "rc $rc"
  # A broken bulk-copy kernel could hang the bench: leave it out then.
  [ $rc = 0 ] || { status=1; export KVTIER_BENCH_BULK=0; }
  echo "== tests: the same against the CPU twin, and planning"
  timeout 120 "$build/test_copy_twin" --gtest_brief=1 > "$build/twin.txt" 2>&1; rc=$?
  tail -3 "$build/twin.txt"; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi

if [ "${KVTIER_GPU_BENCH:-1}" = 1 ]; then
  echo "== bench/transfer"
  timeout 420 "$build/transfer" --json "$out/transfer.json" > "$out/transfer.txt" 2>&1; rc=$?
  cat "$out/transfer.txt"; echo "rc $rc"
  [ $rc = 0 ] || status=1
fi

if [ "${KVTIER_SANITIZE_GPU:-1}" = 1 ] && command -v compute-sanitizer > /dev/null && [ -n "$gtest_objs" ]; then
  echo "== compute-sanitizer memcheck on the GPU mover tests"
  timeout "${KVTIER_GPU_TEST_TIMEOUT:-150}" compute-sanitizer --tool memcheck --leak-check no "$build/test_copy_cuda" \
    --gtest_filter='*keeps_every_byte*:*layer_range*:*many_threads*:*split*' 2>&1 | tail -6
fi
echo "== done: status $status"
exit $status
