#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs every test.
# CI (CI=true) also builds and runs the tests under ASan + UBSan, the
# threaded engines' tests under ThreadSanitizer (scripts/tsan.sh), then builds
# the libFuzzer targets with clang and fuzzes them (scripts/fuzz.sh: 60 s for
# the frame parser, 20 s for each other target, unless KVTIER_FUZZ_SECONDS says).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/setup.sh"
ctest --test-dir "${KVTIER_BUILD_DIR:-$root/build}" --output-on-failure -j "$(nproc)"
if [ "${KVTIER_SANITIZE_TESTS:-${CI:-false}}" = true ]; then
  KVTIER_SANITIZE=1 KVTIER_BUILD_TYPE=Debug KVTIER_BUILD_DIR="$root/build-asan" "$root/scripts/setup.sh"
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir "$root/build-asan" --output-on-failure -j "$(nproc)"
  bash "$root/scripts/tsan.sh"
fi
if [ "${KVTIER_FUZZ_TESTS:-${CI:-false}}" = true ]; then
  "$root/scripts/fuzz.sh" # KVTIER_FUZZ_SECONDS, if set, overrides its per-target times
fi
