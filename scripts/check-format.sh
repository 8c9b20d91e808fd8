#!/usr/bin/env bash
# Fails, naming each file, when a C++ or CUDA source differs from what
# clang-format makes of it with the project's .clang-format.
#   scripts/check-format.sh [root]     check
#   scripts/check-format.sh --fix      rewrite the files in place
set -euo pipefail
fix=0
if [ "${1:-}" = --fix ]; then fix=1; shift; fi
root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
cd "$root"
format=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$format" ] || { echo "check-format: clang-format not found (scripts/setup.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' 2>/dev/null ||
                     find . -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh')
if [ $fix = 1 ]; then
  "$format" -i "${files[@]}"
  exit 0
fi
# One clang-format process for every file (one per file cost a minute of CPU in
# each test run); --dry-run -Werror reports each difference as "file:line:col: error".
report=$("$format" --dry-run -Werror "${files[@]}" 2>&1) && status=0 || status=$?
if [ $status -ne 0 ]; then
  mapfile -t bad < <(grep -oE '^[^:]+:[0-9]+:[0-9]+: error' <<<"$report" | cut -d: -f1 | sort -u)
  [ ${#bad[@]} -gt 0 ] || { echo "$report"; echo "check-format: clang-format failed (exit $status)"; exit 1; }
  for f in "${bad[@]}"; do
    echo "$f: not formatted (scripts/check-format.sh --fix rewrites it)"
  done
  echo "check-format: ${#bad[@]} file(s) differ from .clang-format"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
