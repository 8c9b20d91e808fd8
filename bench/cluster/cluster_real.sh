#!/usr/bin/env bash
# The cluster for real on one machine: a redis-server, a prefill node, two
# decode nodes and the router, each its own kvtierd process on loopback.
# Measures, through `kvtier route`:
#   - the handoff per request: the prefill's last block acknowledged by the
#     remote store -> every block in place on the decode node (sequential
#     requests, so nothing queues), and of it the router's hop (prefill end ->
#     the decode node starts pulling);
#   - block throughput through the remote tier (prefill writes, decode pulls),
#     one request at a time and 8 at once;
#   - beside them, redis-benchmark on the same server with values of one
#     block (SET and GET, unpipelined and 16 deep): the baseline, as a ratio;
#   - how long the router takes to notice a decode node that was killed
#     (SIGKILL: its connection closes) and one that hangs (SIGSTOP: the BASP
#     heartbeats stop; connection_timeout_ms);
#   - a long decode whose node is killed halfway: it resumes on the other
#     decode node after its checkpointed tokens; its wall time against the
#     same decode uninterrupted, in the same run (the kill above is this one).
#
#   bench/cluster/cluster_real.sh [BUILD_DIR [OUT_PREFIX]]
# Writes OUT_PREFIX.txt and OUT_PREFIX.json (default
# bench/results/<date>-cpu-vm-cluster-real).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-$root/build}
out=${2:-$root/bench/results/$(date -u +%Y-%m-%d)-cpu-vm-cluster-real}
kvtierd=$build/daemon/kvtierd
kvtier=$build/kvtier
block_bytes=65536
block_tokens=16
prompt_tokens=2048 # 128 blocks, 8 MiB per request
requests=48
work=$(mktemp -d /tmp/kvtier-cluster-bench-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

base=$((20000 + RANDOM % 20000))
redis_port=$base
router_port=$((base + 1))
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --logfile "$work/redis.log" \
  --proto-max-bulk-len 64mb &
pids+=($!)
node() { # NAME ROLE PORT
  cat > "$work/$1.toml" <<EOT
[node]
role = "$2"
name = "$1"
listen = "127.0.0.1:$3"
redis = "127.0.0.1:$redis_port"
block_tokens = $block_tokens
block_bytes = $block_bytes
dram_blocks = 8192
decode_step_us = 100
heartbeat_ms = 100
connection_timeout_ms = 500
EOT
  "$kvtierd" "$work/$1.toml" > "$work/$1.log" 2>&1 &
  pids+=($!)
  eval "pid_$1=$!"
}
for i in $(seq 50); do redis-cli -p "$redis_port" ping > /dev/null 2>&1 && break; sleep 0.1; done
node prefill_a prefill $((base + 2))
node decode_b decode $((base + 3))
node decode_c decode $((base + 4))
cat > "$work/router.toml" <<EOT
[node]
role = "router"
name = "router"
listen = "127.0.0.1:$router_port"
heartbeat_ms = 100
connection_timeout_ms = 500
[[member]]
name = "prefill_a"
role = "prefill"
address = "127.0.0.1:$((base + 2))"
[[member]]
name = "decode_b"
role = "decode"
address = "127.0.0.1:$((base + 3))"
[[member]]
name = "decode_c"
role = "decode"
address = "127.0.0.1:$((base + 4))"
EOT
"$kvtierd" "$work/router.toml" > "$work/router.log" 2>&1 &
pids+=($!)

route() { timeout 300 "$kvtier" route --router "127.0.0.1:$router_port" --prompt-tokens $prompt_tokens --decode-tokens 1 --json "$@"; }
route --requests 4 --seed 99 > /dev/null # warm-up: connections, page faults of the tiers
route --requests $requests --seed 1 --concurrency 1 > "$work/seq.json"
route --requests $requests --seed 2 --concurrency 8 > "$work/par.json"

rb() { # TEST PIPELINE CLIENTS -> requests per second
  # One key, set before it is read: every GET returns a whole value.
  redis-benchmark -p "$redis_port" -t "$1" -d $block_bytes -n 4000 -P "$2" -c "$3" --csv 2>/dev/null |
    tail -1 | cut -d, -f2 | tr -d '"'
}
set_p1=$(rb set 1 1); get_p1=$(rb get 1 1); set_p16=$(rb set 16 1); get_p16=$(rb get 16 1)
get_c8=$(rb get 16 8)

# A long decode, whole and then with its node killed halfway. With both
# decode nodes idle the router picks decode_b, the first it lists.
long_tokens=8192
route_long() { timeout 300 "$kvtier" route --router "127.0.0.1:$router_port" --prompt-tokens $prompt_tokens \
  --decode-tokens $long_tokens --json --requests 1 "$@"; }
route_long --seed 5 > "$work/long-whole.json"
whole_s=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["wall_s"])' "$work/long-whole.json")
route_long --seed 6 > "$work/long-moved.json" &
route_pid=$!
sleep "$(awk -v w="$whole_s" 'BEGIN{printf "%.3f", w / 2}')"

# Liveness: the router's log names the moment it saw each node go.
t_kill=$(date +%s%N); kill -9 "$pid_decode_b"; wait "$pid_decode_b" 2>/dev/null || true
wait "$route_pid"
t_stop=0
for i in $(seq 100); do grep -q "decode_b is down" "$work/router.log" && break; sleep 0.02; done
t_stop=$(date +%s%N); kill -STOP "$pid_decode_c"
for i in $(seq 200); do grep -q "decode_c is down" "$work/router.log" && break; sleep 0.02; done
down_ns() { grep "$1 is down" "$work/router.log" | sed -E 's/.*unix_ns ([0-9]+).*/\1/'; }
kill_ms=$(awk -v a="$(down_ns decode_b)" -v b="$t_kill" 'BEGIN{printf "%.1f", (a-b)/1e6}')
stop_ms=$(awk -v a="$(down_ns decode_c)" -v b="$t_stop" 'BEGIN{printf "%.1f", (a-b)/1e6}')
refusal=$("$kvtier" route --router "127.0.0.1:$router_port" --requests 1 --seed 3 --wait 0 2>&1 | head -1 || true)

python3 - "$work" "$out" "$block_bytes" "$set_p1" "$get_p1" "$set_p16" "$get_p16" "$get_c8" "$kill_ms" "$stop_ms" \
  "$refusal" "$long_tokens" <<'EOP'
import json, sys
work, out, bb = sys.argv[1], sys.argv[2], int(sys.argv[3])
set_p1, get_p1, set_p16, get_p16, get_c8 = (float(x) * bb / 1e9 for x in sys.argv[4:9])
kill_ms, stop_ms, refusal = float(sys.argv[9]), float(sys.argv[10]), sys.argv[11].strip()
seq = json.load(open(f"{work}/seq.json")); par = json.load(open(f"{work}/par.json"))
whole = json.load(open(f"{work}/long-whole.json")); moved = json.load(open(f"{work}/long-moved.json"))
mr = moved["per_request"][0]
long_run = {"decode_tokens": int(sys.argv[12]), "whole_wall_s": whole["wall_s"], "moved_wall_s": moved["wall_s"],
            "moved_decode_node": mr["decode_node"], "moved_decode_attempts": mr["decode_attempts"],
            "tokens_resumed": mr["tokens_resumed"], "tokens_recomputed": mr["tokens_recomputed"],
            "ratio_moved_over_whole": moved["wall_s"] / whole["wall_s"] if whole["wall_s"] else 0}
for r in (seq, par):
    del r["per_request"]
res = {
    "machine": "cpu-vm (2 cores shared)", "block_bytes": bb, "prompt_tokens": seq["prompt_tokens"],
    "blocks_per_request": seq["blocks_pulled"] // max(1, seq["completed"]),
    "sequential": seq, "concurrent_8": par,
    "redis_benchmark_gbps": {"set_p1_c1": set_p1, "get_p1_c1": get_p1, "set_p16_c1": set_p16, "get_p16_c1": get_p16,
                             "get_p16_c8": get_c8},
    "ratio_pull_vs_redis_get_p16": seq["pull_gbps_busy"] / get_p16 if get_p16 else 0,
    "ratio_write_vs_redis_set_p1": seq["write_gbps_per_request_p50"] / set_p1 if set_p1 else 0,
    "ratio_pull8_vs_redis_get_p16_c8": par["pull_gbps"] / get_c8 if get_c8 else 0,
    "router_notices_killed_node_ms": kill_ms, "router_notices_hung_node_ms": stop_ms,
    "connection_timeout_ms": 500, "refusal_with_no_decode_node": refusal,
    "decode_moved_halfway": long_run,
}
json.dump(res, open(out + ".json", "w"), indent=2)
lines = [
    f"cluster on loopback: 1 prefill, 2 decode nodes, router; redis-server; blocks of {bb // 1024} KiB, "
    f"{res['blocks_per_request']} blocks per request",
    f"sequential ({seq['completed']} requests): handoff p50 {seq['handoff_us_p50']:.0f} us, p99 {seq['handoff_us_p99']:.0f} us "
    f"(the router's hop in it: p50 {seq['dispatch_us_p50']:.0f} us, p99 {seq['dispatch_us_p99']:.0f} us); "
    f"pull {seq['pull_gbps_busy']:.3f} GB/s while pulling, prefill writes {seq['write_gbps_per_request_p50']:.3f} GB/s (p50 per request); "
    f"recomputed tokens {seq['tokens_recomputed']}; all KV match: {seq['all_kv_match']}",
    f"8 in flight ({par['completed']} requests): handoff p50 {par['handoff_us_p50']:.0f} us, p99 {par['handoff_us_p99']:.0f} us; "
    f"pull {par['pull_gbps']:.3f} GB/s, prefill writes {par['write_gbps']:.3f} GB/s; all KV match: {par['all_kv_match']}",
    f"redis-benchmark, {bb // 1024} KiB values: SET {set_p1:.3f} GB/s, GET {get_p1:.3f} GB/s unpipelined; "
    f"SET {set_p16:.3f}, GET {get_p16:.3f} GB/s 16 deep; GET {get_c8:.3f} GB/s 16 deep x 8 clients",
    f"ratios: decode pull / redis GET 16 deep = {res['ratio_pull_vs_redis_get_p16']:.2f}; "
    f"prefill writes / redis SET unpipelined = {res['ratio_write_vs_redis_set_p1']:.2f}; "
    f"8 in flight pull / redis GET 16 deep x 8 = {res['ratio_pull8_vs_redis_get_p16_c8']:.2f}",
    f"router notices a killed decode node in {kill_ms:.1f} ms, a hung one (SIGSTOP) in {stop_ms:.1f} ms "
    f"(connection_timeout_ms 500)",
    f"with no decode node live: {refusal}",
    f"a decode of {long_run['decode_tokens']} tokens whose node was killed halfway: done on {long_run['moved_decode_node']} "
    f"(attempt {long_run['moved_decode_attempts']}) after resuming {long_run['tokens_resumed']} checkpointed tokens, "
    f"{long_run['tokens_recomputed']} tokens recomputed; {long_run['moved_wall_s']:.2f} s against "
    f"{long_run['whole_wall_s']:.2f} s uninterrupted ({long_run['ratio_moved_over_whole']:.2f}x)",
]
open(out + ".txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOP
