#!/usr/bin/env bash
# The installed package as an application sees it: `cmake --install` into a
# temporary prefix, examples/embed and examples/client configured with
# find_package(kvtier) against it and built, then run: embed simulates in
# process; client talks to the installed kvtierd over a Unix socket.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
work=$(mktemp -d)
daemon=""
cleanup() {
  if [ -n "$daemon" ]; then kill -9 "$daemon" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
# ccache speeds the examples' rebuilds where it is installed; the setup script does not require it.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
for example in embed client; do
  cmake -S "$source/examples/$example" -B "$work/$example" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$work/prefix" "${launcher[@]}" >"$work/$example.log" ||
    { cat "$work/$example.log"; exit 1; }
  cmake --build "$work/$example" >>"$work/$example.log" || { cat "$work/$example.log"; exit 1; }
done

"$work/embed/embed"

cat >"$work/d.toml" <<TOML
[daemon]
socket = "$work/d.sock"
metrics = ""
block_bytes = "64KiB"
[dram]
bytes = "4MiB"
[[tenant]]
name = "app"
token = "secret"
TOML
"$work/prefix/bin/kvtierd" "$work/d.toml" >"$work/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 500); do [ -S "$work/d.sock" ] && break; sleep 0.01; done
"$work/client/client" "$work/d.sock" app secret
kill -TERM "$daemon"
wait "$daemon"
daemon=""
echo "install: find_package(kvtier) builds both examples; both ran"
