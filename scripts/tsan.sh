#!/usr/bin/env bash
# ThreadSanitizer over the tests whose code runs threads of its own: the copy
# engine's worker pool and movers (test_copy), the NVMe store's I/O engines and
# completion threads (test_io), and the real backend end to end on the CPU
# twin (test_real: CAF's threaded scheduler, the copy and page completion
# threads, the stand-in compute port). Builds only those, in build-tsan/.
#   bash scripts/tsan.sh            exit 0: no race reported
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KVTIER_TSAN_BUILD_DIR:-$root/build-tsan}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVTIER_TSAN=ON \
  -DKVTIER_WITH_CUDA=OFF -DKVTIER_BUILD_BENCH=OFF > /dev/null
cmake --build "$build" -j "${KVTIER_JOBS:-$(nproc)}" --target test_copy test_io test_real
cd "$root" # the tests read bundled files relative to the source tree
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$root/scripts/tsan.supp ${TSAN_OPTIONS:-}"
status=0
for t in kernels/test_copy io/test_io real/test_real; do
  echo "== tsan: $t"
  "$build/tests/$t" --gtest_brief=1 || status=1
done
exit $status
