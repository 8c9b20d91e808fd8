#!/usr/bin/env bash
# The include layers of docs/ARCHITECTURE.md ("knows" column), checked.
#
#   scripts/check-layers.sh [ROOT]      exit 0: every include is allowed;
#                                       exit 1: one line per violation, file:line: what and why
#
# Each top-level folder may include the project folders listed for it below
# and nothing else of the project; a third-party header family (CAF's actor
# machinery, CAF's virtual time, CUDA, liburing, TOML++, Boost, pybind11, hiredis) may be
# included only where the table says. client/ (kvtierd's client library, linked by host
# applications) knows no other folder and no CAF at all; daemon/ (kvtierd) uses
# client/'s frame codec, the DRAM pool of runtime/ and io/'s NVMe store, but no
# actors. tests/kernels/ and bench/kernels/ follow kernels/'
# rule (the GPU-only build compiles them without CAF or TOML++), except that
# tests may cross-check against any runtime/ header and may be clients of
# kvtierd through client/ (which needs no library); other tests, benches and
# examples may include anything.
set -euo pipefail
root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
cd "$root"

# folder -> project folders it may include (itself always).
declare -A may_include=(
  [runtime]=""
  [cache]=""
  [kernels]="runtime"
  [io]="runtime"
  [remote]="runtime io"
  [compression]="runtime kernels"
  [actors]="runtime compression cache"
  [run]="runtime actors"
  [sim]="runtime actors run cache"
  [real]="runtime actors run kernels io remote"
  [experiment]="runtime actors run sim cache"
  [cli]="runtime kernels io remote compression actors run sim real cache experiment node"
  [client]=""
  [node]="runtime io remote"
  [daemon]="runtime io client node"
  [python]="runtime actors run sim client"
)
# The only runtime/ headers kernels/ may use: plain headers that need no
# library, so that the CUDA parts build with nvcc alone (-DKVTIER_GPU_ONLY=ON).
kernels_runtime_headers="runtime/check.hpp runtime/tier.hpp runtime/tier_layout.hpp runtime/hardware.hpp runtime/mutex.hpp runtime/thread_annotations.hpp runtime/worker_queue.hpp"
# kernels/quant (the codecs) is the part of kernels/ that compression/ may use (not the copy engine), and
# kernels/model's CPU twin (never cuda/) in compression/model_quality.* alone: it measures the policies on
# the model's own forward.

# Third-party families: regex on the included name -> folders that may include it.
caf_values='^caf/(error|expected|sec|message|atom|fwd)\.hpp$' # CAF's error values: kvtier's error type
caf_virtual_time='^caf/(scheduler/test_coordinator|detail/test_actor_clock)\.hpp$'
caf_any='^caf/'
cuda='^(cuda|cuda_[a-z0-9_]+|cublas[a-z0-9_]*|curand[a-z0-9_]*|cufile)\.h$|^cuda/|\.cuh$'
liburing='^liburing(\.h|/)'
toml='^toml\+\+/'
boost='^boost/'
pybind11='^(pybind11/|Python\.h$)'
hiredis='^hiredis/'
folders_caf_values="runtime io remote compression actors run sim experiment real cli daemon node"
folders_caf_actors="actors run sim real cli node"
folders_virtual_time="sim"
folders_cuda="kernels"
folders_liburing="io"
folders_boost="daemon"
folders_pybind11="python"
folders_hiredis="remote"
# TOML++ only where config tables are read: runtime's readers and the table
# readers of compression/, sim/ and experiment/ (the experiment file).
files_toml="runtime/ compression/precision_config. sim/synthetic_spec. daemon/daemon_config. experiment/experiment_spec. node/node_config."

violations=0
report() {
  echo "$1: $2" >&2
  violations=$((violations + 1))
}

in_list() { # word list...
  local w=$1; shift
  for x in "$@"; do [ "$x" = "$w" ] && return 0; done
  return 1
}

prefix_in_list() { # path prefixes...
  local p=$1; shift
  for x in "$@"; do [[ $p == "$x"* ]] && return 0; done
  return 1
}

# The layer a file belongs to: its top-level folder, or kernels for tests/kernels and bench/kernels.
layer_of() {
  local f=$1 top=${1%%/*}
  case $f in
    tests/kernels/* | bench/kernels/*) echo kernels ;;
    *) [ -n "${may_include[$top]+x}" ] && echo "$top" || echo "" ;;
  esac
}

while IFS= read -r file; do
  layer=$(layer_of "$file")
  [ -n "$layer" ] || continue
  while IFS=: read -r line text; do
    if [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
      inc=${BASH_REMATCH[1]}
      target=${inc%%/*}
      [ "$target" = "$inc" ] && continue            # a sibling file, relative include
      [ -n "${may_include[$target]+x}" ] || continue # tests/, generated kvtier/: not a layer
      [ "$target" = "$layer" ] && continue
      [ "$layer" = kernels ] && [ "$target" = client ] && [[ $file == tests/* ]] && continue
      # shellcheck disable=SC2086
      if ! in_list "$target" ${may_include[$layer]}; then
        report "$file:$line" "$layer/ may not include \"$inc\" ($layer/ knows only: ${may_include[$layer]:-itself})"
        continue
      fi
      # shellcheck disable=SC2086
      if [ "$layer" = kernels ] && [ "$target" = runtime ] && [[ $file != tests/* ]] && ! in_list "$inc" $kernels_runtime_headers; then
        report "$file:$line" "kernels/ may include only the library-free runtime headers ($kernels_runtime_headers), not \"$inc\""
      fi
      if [ "$layer" = compression ] && [ "$target" = kernels ] && [[ $inc != kernels/quant/* ]] &&
        { [[ $inc != kernels/model/* ]] || [[ $inc == kernels/model/cuda/* ]] ||
          [[ $file != compression/model_quality.* ]]; }; then
        report "$file:$line" "compression/ may include only kernels/quant/ of kernels/ (and kernels/model/, not its cuda/, in compression/model_quality.* alone), not \"$inc\""
      fi
    elif [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
      inc=${BASH_REMATCH[1]}
      # shellcheck disable=SC2086
      if [[ $inc =~ $caf_virtual_time ]]; then
        in_list "$layer" $folders_virtual_time ||
          report "$file:$line" "<$inc> is virtual time: only sim/ may include it"
      elif [[ $inc =~ $caf_values ]]; then
        in_list "$layer" $folders_caf_values ||
          report "$file:$line" "<$inc>: $layer/ builds without CAF (CAF's error values are for: $folders_caf_values)"
      elif [[ $inc =~ $caf_any ]]; then
        in_list "$layer" $folders_caf_actors ||
          report "$file:$line" "<$inc> is CAF's actor machinery: only $folders_caf_actors may include it"
      elif [[ $inc =~ $cuda ]]; then
        in_list "$layer" $folders_cuda ||
          report "$file:$line" "<$inc> is CUDA: only kernels/ may include it"
      elif [[ $inc =~ $liburing ]]; then
        in_list "$layer" $folders_liburing ||
          report "$file:$line" "<$inc> is liburing: only io/ may include it"
      elif [[ $inc =~ $hiredis ]]; then
        in_list "$layer" $folders_hiredis ||
          report "$file:$line" "<$inc> is hiredis: only remote/ may include it"
      elif [[ $inc =~ $boost ]]; then
        in_list "$layer" $folders_boost ||
          report "$file:$line" "<$inc> is Boost: only $folders_boost may include it"
      elif [[ $inc =~ $pybind11 ]]; then
        in_list "$layer" $folders_pybind11 ||
          report "$file:$line" "<$inc> is the Python C API: only python/ may include it"
      elif [[ $inc =~ $toml ]]; then
        prefix_in_list "$file" $files_toml ||
          report "$file:$line" "<$inc> is TOML++: only the config readers may include it ($files_toml)"
      fi
    fi
  done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file" || true)
done < <(find . -path ./.git -prune -o -path './build*' -prune -o -path ./third_party -prune -o \
           -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print |
           sed 's#^\./##' | LC_ALL=C sort)

if [ "$violations" -gt 0 ]; then
  echo "check-layers: $violations include(s) break the layers of docs/ARCHITECTURE.md" >&2
  exit 1
fi
echo "check-layers: every include respects docs/ARCHITECTURE.md's layers"
