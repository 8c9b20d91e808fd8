#!/usr/bin/env bash
# ThreadSanitizer over the engines that run threads of their own: the copy
# engine's worker pool and movers (test_copy), the NVMe store's I/O
# engines, retries and completion threads (test_io), and the fork-join that
# advances a simulated cluster's replicas (test_lockstep). Builds only those, in
# build-tsan/ (-DKVTIER_TSAN=ON), and runs them; any report fails the run.
#
# test_real is left out: its threads hand results to actors through CAF's
# mailbox, and the Debian libcaf_core is not instrumented, so TSan cannot see
# that hand-off and reports every message as a race.
#   bash scripts/tsan.sh            exit 0: no race reported
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KVTIER_TSAN_BUILD_DIR:-$root/build-tsan}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVTIER_TSAN=ON \
  -DKVTIER_WITH_CUDA=OFF -DKVTIER_BUILD_BENCH=OFF -DKVTIER_PRECOMPILE_HEADERS="${KVTIER_PRECOMPILE_HEADERS:-ON}" \
  -DKVTIER_DEBUG_INFO="${KVTIER_DEBUG_INFO:-}" -DKVTIER_UNITY_BUILD="${KVTIER_UNITY_BUILD:-ON}" > /dev/null
cmake --build "$build" -j "${KVTIER_JOBS:-$(nproc)}" --target test_copy test_io test_lockstep
cd "$root" # the tests read bundled files relative to the source tree
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
status=0
for t in kernels/test_copy io/test_io sim/test_lockstep; do
  echo "== tsan: $t"
  "$build/tests/$t" --gtest_brief=1 || status=1
done
exit $status
