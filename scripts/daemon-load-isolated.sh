#!/usr/bin/env bash
# The kvtierd load benchmark (bench/daemon/bench_daemon_load) with the stores
# on cores of their own: kvtierd and redis-server pinned to SERVER_CPUS (default
# 0-1), the load generator to LOAD_CPUS (default every other core), so neither
# store waits for a core the load holds. Needs no build tree: it runs prebuilt
# binaries named by the environment, e.g. from a folder copied to another host.
#
#   KVTIERD=./kvtierd BENCH_DAEMON_LOAD=./bench_daemon_load REDIS_SERVER=./redis-server \
#     scripts/daemon-load-isolated.sh [extra bench_daemon_load flags]
#
#   KVTIERD, BENCH_DAEMON_LOAD, REDIS_SERVER   the binaries; default: the one in the
#                            current folder, else build/daemon/kvtierd,
#                            build/bench/daemon/bench_daemon_load, and redis-server on PATH
#   SERVER_CPUS              default 0-1; LOAD_CPUS default 2-(cores-1); at least 3 cores
#   CLIENTS, PHASE_SECONDS, THINK_MS, LOOPS   default 1000, 5, 20, min(4, load cores)
#   THINK                    exponential (default: independent users) or fixed (clients in step)
#   MACHINE                  the result's machine name, default the short host name
#   RESULTS_DIR              default bench/results when it exists here, else the current folder
#
# Writes RESULTS_DIR/<date>-<machine>-daemon-load-isolated.{txt,json} (the date is UTC)
# and exits with bench_daemon_load's status (non-zero on any error, lost or wrong
# block). The binaries' shared libraries must be installed (scripts/setup.sh has
# the Debian packages); a missing one is named before anything runs.
set -euo pipefail
pick() { # pick VALUE CANDIDATE... -> the first that is given or exists
  local given=$1
  shift
  if [[ -n $given ]]; then
    echo "$given"
    return
  fi
  for c in "$@"; do
    if [[ -x $c ]]; then
      echo "$c"
      return
    fi
  done
  echo "$1"
}
kvtierd=$(pick "${KVTIERD:-}" ./kvtierd build/daemon/kvtierd)
bench=$(pick "${BENCH_DAEMON_LOAD:-}" ./bench_daemon_load build/bench/daemon/bench_daemon_load)
redis=$(pick "${REDIS_SERVER:-}" ./redis-server "$(command -v redis-server || true)")
for b in "$kvtierd" "$bench" "$redis"; do
  if [[ -z $b || ! -x $b ]]; then
    echo "daemon-load-isolated: no executable at \"$b\" (set KVTIERD, BENCH_DAEMON_LOAD, REDIS_SERVER)" >&2
    exit 2
  fi
  if missing=$(ldd "$b" 2>/dev/null | grep 'not found'); then
    echo "daemon-load-isolated: $b needs shared libraries this host lacks:" >&2
    echo "$missing" >&2
    exit 2
  fi
done
cores=$(nproc)
server_cpus=${SERVER_CPUS:-0-1}
if [[ -z ${LOAD_CPUS:-} && $cores -lt 3 ]]; then
  echo "daemon-load-isolated: $cores cores; the stores take 0-1 and the load needs another (set SERVER_CPUS and LOAD_CPUS)" >&2
  exit 2
fi
load_cpus=${LOAD_CPUS:-2-$((cores - 1))}
load_count=$(($(echo "$load_cpus" | tr ',' '\n' | awk -F- '{n += (NF == 2 ? $2 - $1 + 1 : 1)} END {print n}')))
loops=${LOOPS:-$((load_count < 4 ? load_count : 4))}
machine=${MACHINE:-$(hostname -s)}
results=${RESULTS_DIR:-$([[ -d bench/results ]] && echo bench/results || echo .)}
mkdir -p "$results"
out="$results/$(date -u +%F)-$machine-daemon-load-isolated"
cmd=("$bench" --clients "${CLIENTS:-1000}" --seconds "${PHASE_SECONDS:-5}" --think-ms "${THINK_MS:-20}" --think "${THINK:-exponential}"
  --loops "$loops" --kvtierd "$kvtierd" --redis-server "$redis" --server-cpus "$server_cpus" --load-cpus "$load_cpus"
  --json "$out.json" "$@")
{
  echo "# ${cmd[*]}"
  echo "# $(uname -srm), $cores cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
} >"$out.txt"
set +e
"${cmd[@]}" | tee -a "$out.txt"
rc=${PIPESTATUS[0]}
set -e
echo "daemon-load-isolated: $out.txt and $out.json (exit $rc)" >&2
exit "$rc"
