#!/usr/bin/env bash
# Installs the Debian packages kvtier builds against (skipping those present),
# then configures and builds into ${KVTIER_BUILD_DIR:-build}.
#   KVTIER_SANITIZE=1  adds ASan + UBSan (used by CI in a second build dir).
#   KVTIER_FUZZ=1      installs clang-14 and its sanitizer/libFuzzer runtimes and
#                      configures the fuzz build instead (scripts/fuzz.sh).
#   KVTIER_PRECOMPILE_HEADERS=OFF  parses CAF, fmt and GoogleTest in every source
#                      again (default ON: docs/building.md).
#   KVTIER_UNITY_BUILD=OFF  compiles each test and CLI source alone again (default
#                      ON: a test binary is one translation unit, docs/building.md).
#   KVTIER_DEBUG_INFO=lines  line tables only (-g1): CI, where no debugger runs
#                      (default: the build type's full debug info).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${KVTIER_BUILD_DIR:-$root/build}

packages=(
  cmake g++ ninja-build pkg-config   # toolchain
  clang-format clang-14               # format check; clang's thread-safety analysis test
  libcaf-dev                          # actor system (scheduler, block manager, transfer engine)
  liburing-dev                        # NVMe page store
  libboost-dev                        # kvtierd: Boost.Asio (sockets) and Boost.Beast (/metrics), header-only
  redis-server libhiredis-dev         # bench_daemon_load's peer: the same blocks held in redis
  libtomlplusplus-dev                 # configs
  libgtest-dev libbenchmark-dev       # tests and micro-benchmarks
  libcli11-dev                        # command line
  libfmt-dev                          # formatting
  nlohmann-json3-dev                  # JSON reports and traces
  libxxhash-dev                       # block hashes (XXH3-128)
  fio                                 # page-store benchmark baseline
  pybind11-dev python3-dev            # the Python package (python/), built for /usr/bin/python3
  python3-numpy python3-torch         # its region views and the engine adapters' tests (torch: CPU)
  chromium                            # headless: the test that screenshots `kvtier experiment`'s HTML report
  python3-pil                         # that test reads the screenshot (Pillow) instead of decoding PNG itself
)
if [ "${KVTIER_FUZZ:-0}" = 1 ]; then
  packages+=(clang-14 libclang-rt-14-dev) # libFuzzer and clang's ASan/UBSan runtimes
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -q
  $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Precompiled headers and unity builds of the tests and the CLI cut a full build's compile time
# (docs/building.md).
extra=(-DKVTIER_PRECOMPILE_HEADERS="${KVTIER_PRECOMPILE_HEADERS:-ON}" -DKVTIER_DEBUG_INFO="${KVTIER_DEBUG_INFO:-}"
  -DKVTIER_UNITY_BUILD="${KVTIER_UNITY_BUILD:-ON}")
# The sanitizer build runs the host tests only: its benchmarks and examples would be built and never
# run, and ASan does not instrument device code (the CUDA tests skip without a GPU anyway).
if [ "${KVTIER_SANITIZE:-0}" = 1 ]; then
  extra+=(-DKVTIER_SANITIZE=ON -DKVTIER_BUILD_BENCH=OFF -DKVTIER_BUILD_EXAMPLES=OFF -DKVTIER_WITH_CUDA=OFF)
fi
if [ "${KVTIER_FUZZ:-0}" = 1 ]; then
  extra+=(-DKVTIER_FUZZ=ON -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)
fi
# Configuring again is cheap and picks up new files and options.
if true; then
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${KVTIER_BUILD_TYPE:-RelWithDebInfo} "${extra[@]}"
fi
cmake --build "$build_dir" -j "${KVTIER_JOBS:-$(nproc)}"
