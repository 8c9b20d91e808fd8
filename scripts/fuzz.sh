#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang-14 (ASan, UBSan,
# float-cast-overflow) into build-fuzz and runs each over its seed corpus
# tests/fuzz/corpus/<target> for a bounded time. Exits non-zero on any failure.
#
#   KVTIER_FUZZ_SECONDS      seconds of fuzzing per target; 0 runs the corpus
#                            once and generates nothing new. Unset: 60 for
#                            frame (kvtierd's frame parser: bytes from any
#                            local process; the daemon's spec asks for 60) and
#                            5 for each other target: 90 s of fuzzing, which
#                            takes about 60 s of wall on 2 cores (below)
#   KVTIER_JOBS              targets fuzzing at once (default: every core)
#   KVTIER_FUZZ_KNOWN=corpus a target with a recorded failure that still fails
#                            (tests/fuzz/crashes/<target>/) runs its corpus only,
#                            so an open bug does not fail every run; "fuzz"
#                            fuzzes it anyway
#   KVTIER_FUZZ_TARGETS="config units"   a subset (default: every target)
#   KVTIER_FUZZ_BUILD_DIR    default build-fuzz
#   scripts/fuzz.sh replay   runs each recorded failure in tests/fuzz/crashes/
#                            and says which still fail (exit 0 either way)
#
# Inputs found along the way go to $build/corpus/<target>, never into the
# checked-in corpus; a failing input is left in $build/artifacts/<target>/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KVTIER_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${KVTIER_FUZZ_SECONDS:-}
all_targets=(config hardware_profile trace_mooncake trace_azure trace_burstgpt units frame)
read -r -a targets <<<"${KVTIER_FUZZ_TARGETS:-${all_targets[*]}}"
mode=${1:-run}

KVTIER_FUZZ=1 KVTIER_BUILD_DIR="$build" "$root/scripts/setup.sh"

dictionary() {
  case $1 in
    trace_azure | trace_burstgpt) echo "$root/tests/fuzz/dict/trace_csv.dict" ;;
    *) if [ -f "$root/tests/fuzz/dict/$1.dict" ]; then echo "$root/tests/fuzz/dict/$1.dict"; fi ;;
  esac
}

# Leaks are reported by ASan at exit; UBSan reports already stop the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Recorded failures of target $1, one path a line (README.md files describe them).
recorded_failures() {
  local input
  for input in "$root"/tests/fuzz/crashes/"$1"/*; do
    if [ -f "$input" ] && [ "${input%.md}" = "$input" ]; then echo "$input"; fi
  done
  return 0
}

# Runs one input through target $1; succeeds when nothing fails.
passes() {
  "$build/tests/fuzz/fuzz_$1" -timeout=10 -rss_limit_mb=2048 "$2" >/dev/null 2>&1
}

if [ "$mode" = replay ]; then
  for t in "${targets[@]}"; do
    while read -r input; do
      [ -n "$input" ] || continue
      if passes "$t" "$input"; then echo "fixed  ${input#"$root"/}"; else echo "FAILS  ${input#"$root"/}"; fi
    done < <(recorded_failures "$t")
  done
  exit 0
fi

# fuzz_target T: fuzzes T for its time into its own log; succeeds when
# nothing failed. Prints nothing: the caller reports, in target order.
fuzz_target() {
  local t=$1 work="$build/corpus/$1" artifacts="$build/artifacts/$1/" target_seconds open input dict
  mkdir -p "$work" "$artifacts"
  local args=(-timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts" -print_final_stats=1)
  if [ -n "$seconds" ]; then
    target_seconds=$seconds
  elif [ "$t" = frame ]; then
    target_seconds=60
  else
    target_seconds=5
  fi
  : >"$build/fuzz-$t.note"
  if [ "$target_seconds" != 0 ] && [ "${KVTIER_FUZZ_KNOWN:-corpus}" = corpus ]; then
    open=0
    while read -r input; do
      if [ -n "$input" ] && ! passes "$t" "$input"; then open=$((open + 1)); fi
    done < <(recorded_failures "$t")
    if ((open > 0)); then
      echo "fuzz: $t still fails on $open recorded inputs (tests/fuzz/crashes/$t): corpus only" >"$build/fuzz-$t.note"
      target_seconds=0
    fi
  fi
  if [ "$target_seconds" = 0 ]; then
    args+=(-runs=0)
  else
    args+=(-max_total_time="$target_seconds")
  fi
  dict=$(dictionary "$t")
  [ -z "$dict" ] || args+=(-dict="$dict")
  echo "fuzz: $t for ${target_seconds}s over tests/fuzz/corpus/$t" >>"$build/fuzz-$t.note"
  # The first folder receives new inputs; the checked-in seeds are only read.
  "$build/tests/fuzz/fuzz_$t" "${args[@]}" "$work" "$root/tests/fuzz/corpus/$t" >"$build/fuzz-$t.log" 2>&1
}

# libFuzzer runs one thread: the targets fuzz side by side, one a core
# (KVTIER_JOBS, default every core), each for its own time, so the step's wall
# time is about the longest target's (the frame parser's, started first)
# rather than the sum. Each target still gets its whole time of one core.
jobs=${KVTIER_JOBS:-$(nproc)}
declare -A pid_of
running=0
launch_order=()
for t in "${targets[@]}"; do [ "$t" != frame ] || launch_order+=(frame); done
for t in "${targets[@]}"; do [ "$t" = frame ] || launch_order+=("$t"); done
for t in "${launch_order[@]}"; do
  if ((running >= jobs)); then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_target "$t" &
  pid_of[$t]=$!
  running=$((running + 1))
done
failed=()
for t in "${targets[@]}"; do
  status=0
  wait "${pid_of[$t]}" || status=$?
  cat "$build/fuzz-$t.note"
  if ((status == 0)); then
    grep -E "^(Done|stat::number_of_executed_units)" "$build/fuzz-$t.log" | tr '\n' ' '
    echo
  else
    failed+=("$t")
    tail -n 60 "$build/fuzz-$t.log"
    echo "fuzz: $t FAILED; input in ${build#"$root"/}/artifacts/$t/ (log $build/fuzz-$t.log)"
  fi
done
if ((${#failed[@]})); then
  echo "fuzz: failures in ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets passed"
