#!/usr/bin/env bash
# scripts/check-layers.sh can fail: a tree with one include across each rule
# must be refused with every offending file:line named; a tree without them
# must pass.
#   check_layers_test.sh path/to/check-layers.sh
set -uo pipefail
check=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/{runtime,kernels/copy,io,compression,actors,run,sim,real,cli,client,daemon,python,tests/kernels}

write() { printf '%s\n' "${@:2}" > "$tree/$1"; }
write runtime/ok.hpp '#pragma once' '#include "runtime/tier.hpp"' '#include <caf/expected.hpp>'
write kernels/copy/ok.cpp '#include "runtime/check.hpp"' '#include <cuda_runtime.h>'
write io/ok.cpp '#include "runtime/config.hpp"' '#include <liburing.h>'
write sim/ok.cpp '#include "run/driver.hpp"' '#include <caf/scheduler/test_coordinator.hpp>'
write real/ok.cpp '#include "kernels/copy/mover.hpp"' '#include "io/slot_store.hpp"' '#include <caf/all.hpp>'
write tests/kernels/ok.cpp '#include "runtime/dtype.hpp"'
write client/ok.cpp '#include "client/wire.hpp"' '#include <sys/socket.h>'
write daemon/ok.cpp '#include "client/wire.hpp"' '#include "io/slot_store.hpp"' '#include <boost/asio.hpp>' '#include <caf/expected.hpp>'
write python/ok.cpp '#include "sim/simulation.hpp"' '#include <pybind11/pybind11.h>'

if ! out=$(bash "$check" "$tree" 2>&1); then
  echo "FAIL: a clean tree was refused:"; echo "$out"; exit 1
fi

write runtime/bad.hpp '#pragma once' '#include "actors/graph.hpp"' '#include <caf/all.hpp>'
write kernels/copy/bad.cpp '#include <liburing.h>' '#include "runtime/config.hpp"' '#include <caf/expected.hpp>'
write io/bad.cpp '// io' '#include <cuda_runtime.h>' '#include "actors/seam.hpp"'
write compression/bad.cpp '#include "kernels/copy/mover.hpp"'
write run/bad.cpp '#include "sim/sim_backend.hpp"' '#include <caf/scheduler/test_coordinator.hpp>'
write real/bad.cpp '#include "sim/simulation.hpp"'
write actors/bad.cpp '#include <toml++/toml.h>' '#include <pybind11/pybind11.h>'
write python/bad.cpp '#include "real/real_system.hpp"'
write tests/kernels/bad.cpp '#include <caf/all.hpp>'
write client/bad.cpp '#include <caf/expected.hpp>' '#include "runtime/block_hash.hpp"'
write daemon/bad.cpp '#include "actors/graph.hpp"' '#include <caf/all.hpp>'
write io/bad_boost.cpp '#include <boost/asio.hpp>'

out=$(bash "$check" "$tree" 2>&1); rc=$?
status=0
[ $rc = 1 ] || { echo "FAIL: exit $rc, expected 1"; status=1; }
for where in runtime/bad.hpp:2 runtime/bad.hpp:3 kernels/copy/bad.cpp:1 kernels/copy/bad.cpp:2 kernels/copy/bad.cpp:3 \
             io/bad.cpp:2 io/bad.cpp:3 compression/bad.cpp:1 run/bad.cpp:1 run/bad.cpp:2 real/bad.cpp:1 \
             actors/bad.cpp:1 actors/bad.cpp:2 python/bad.cpp:1 tests/kernels/bad.cpp:1 client/bad.cpp:1 \
             client/bad.cpp:2 daemon/bad.cpp:1 daemon/bad.cpp:2 io/bad_boost.cpp:1; do
  grep -q "^$where: " <<< "$out" || { echo "FAIL: $where not reported"; status=1; }
done
count=$(grep -c '^[a-z/]*bad[a-z_]*\.[ch]pp:[0-9]*: ' <<< "$out")
[ "$count" = 20 ] || { echo "FAIL: $count violations reported, expected 20"; status=1; }
grep -q 'ok\.' <<< "$out" && { echo "FAIL: an allowed include was reported"; status=1; }
[ $status = 0 ] || { echo "--- output:"; echo "$out"; }
exit $status
