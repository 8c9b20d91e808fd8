#!/usr/bin/env bash
# `cmake --install` lays out an importable package: installed into a temporary
# prefix, `import kvtier` from there (and not from the build) runs a simulation.
#   install_test.sh BUILD_DIR PYTHON PACKAGE_DIR_UNDER_PREFIX
set -euo pipefail
build=$1 python=$2 under=$3
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
cd "$prefix"
PYTHONPATH="$prefix/$under" "$python" - "$prefix" <<'PY'
import sys
import kvtier
assert kvtier.__file__.startswith(sys.argv[1]), kvtier.__file__
report = kvtier.simulate(overrides={"max_requests": 5})
assert report["requests_completed"] == 5, report["requests_completed"]
print("installed kvtier imports from", kvtier.__file__)
PY
