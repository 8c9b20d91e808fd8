# Sourced by the scripts/gpu-*-check.sh checks: where their build and output
# go, the machine's description and the GPU-only configure (sm_90, H100/H200).
#
#   gpu_setup LOG        cd to the source root, set root/out/build/cuda, log
#                        everything from here on to $out/LOG as well
#   gpu_machine FIELDS   date, nvidia-smi --query-gpu=FIELDS, cores, compilers
#   gpu_configure        cmake -DKVTIER_GPU_ONLY=ON into $build (exits on failure);
#                        sets `start` for gpu_built
#   gpu_has_tests        GoogleTest was found: the CPU twins' tests can be built
#   gpu_built            "built in N s"
#
# Environment: OUT (default build-gpu/out), KVTIER_GPU_BUILD (default
# /tmp/kvtier-gpu-build), CUDA_HOME (default /usr/local/cuda), KVTIER_GTEST_DIR
# (default third_party/googletest).

gpu_setup() {
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  cd "$root" || exit 1
  out=${OUT:-$root/build-gpu/out}
  build=${KVTIER_GPU_BUILD:-/tmp/kvtier-gpu-build}
  cuda=${CUDA_HOME:-/usr/local/cuda}
  mkdir -p "$out" "$build"
  exec > >(tee "$out/$1") 2>&1
}

gpu_machine() {
  echo "== machine"
  date -u
  nvidia-smi --query-gpu="$1" --format=csv || true
  echo "cores: $(nproc)"; "$cuda/bin/nvcc" --version | tail -1; g++ --version | head -1
}

gpu_configure() {
  echo "== build (sm_90, cmake -DKVTIER_GPU_ONLY=ON)"
  start=$(date +%s)
  local generator=()
  command -v ninja > /dev/null && generator=(-G Ninja)
  cmake -S "$root" -B "$build" "${generator[@]}" -DKVTIER_GPU_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DKVTIER_GTEST_DIR="${KVTIER_GTEST_DIR:-$root/third_party/googletest}" || { echo "CONFIGURE FAILED"; exit 1; }
}

gpu_has_tests() { grep -q '^KVTIER_GPU_TESTS:INTERNAL=ON' "$build/CMakeCache.txt"; }

gpu_built() { echo "built in $(( $(date +%s) - start )) s"; }
