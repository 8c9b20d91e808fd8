#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs every test.
# CI (CI=true) also builds and runs the tests under ASan + UBSan, the
# threaded engines' tests under ThreadSanitizer (scripts/tsan.sh), then builds
# the libFuzzer targets with clang and fuzzes them (scripts/fuzz.sh: 60 s for
# the frame parser, 5 s for each other target, unless KVTIER_FUZZ_SECONDS says).
# Each step ends with a line saying its wall time and the CPU time it used.
set -euo pipefail
# No test takes a minute, even under ASan on 2 cores: one that runs past this
# is stuck. ctest kills it, names it ("***Timeout") and runs it once more, so
# one stall of the machine costs minutes, not the whole run; a test that
# fails, or stalls twice, still fails the run.
test_timeout=${KVTIER_TEST_TIMEOUT:-300}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# timed STEP COMMAND...: runs COMMAND, then says what it cost.
timed() {
  local TIMEFORMAT="test.sh: $1: %0R s wall, %0U s user + %0S s sys"
  shift
  time "$@"
}

timed build "$root/scripts/setup.sh"
timed tests ctest --test-dir "${KVTIER_BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)" --timeout "$test_timeout" --repeat after-timeout:2
if [ "${KVTIER_SANITIZE_TESTS:-${CI:-false}}" = true ]; then
  timed asan-build env KVTIER_SANITIZE=1 KVTIER_BUILD_TYPE=Debug KVTIER_BUILD_DIR="$root/build-asan" "$root/scripts/setup.sh"
  # The install tests check packaging (cmake --install, find_package, pip-less import), not memory,
  # and the source tests (format, include layers, clang's thread-safety check) run no code kvtier
  # built: both run in the plain pass above.
  timed asan-tests env ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions="$root/scripts/lsan.supp" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j "$(nproc)" --timeout "$test_timeout" --repeat after-timeout:2 -LE "^(install|source)$"
  timed tsan bash "$root/scripts/tsan.sh"
fi
if [ "${KVTIER_FUZZ_TESTS:-${CI:-false}}" = true ]; then
  timed fuzz "$root/scripts/fuzz.sh" # KVTIER_FUZZ_SECONDS, if set, overrides its per-target times
fi
