#!/usr/bin/env bash
# kvtier experiment, interrupted and run again:
#   1. --stop-after 2 with one job: exit 130, exactly 2 records kept;
#   2. the same command again: those 2 are reused, the other 4 run;
#   3. an interrupt (SIGINT) mid-sweep: whatever finished is reused next time;
#   4. results.csv of each resumed sweep equals an uninterrupted sweep's.
#   resume_test.sh path/to/kvtier WORK_DIR
set -uo pipefail
kvtier=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

cat > "$work/tiny.toml" <<'TOML'
[experiment]
title = "resume test"
mode = "cache-only"

[base.sim]
trace_format = "synthetic"

[base.sim.synthetic]
requests = 300
rate_per_s = 10.0
shared_prefix_tokens = 1024
prefix_groups = 3
turns_per_session = 3
input = { dist = "lognormal", mean = 800.0, sigma = 0.5 }
output = 64

[base.tiers.dram]
enabled = false

[base.tiers.nvme]
enabled = false

[sweep]
"tiers.hbm.capacity" = ["64MB", "256MB"]
"cache.policy" = ["lru", "arc", "s3fifo"]
TOML

"$kvtier" experiment "$work/tiny.toml" -o "$work/clean" -j 2 > "$work/clean.log" 2>&1 || fail "clean run: $(cat "$work/clean.log")"
[ "$(ls "$work/clean/points" | wc -l)" -eq 6 ] || fail "a clean sweep of 6 points left $(ls "$work/clean/points" | wc -l) records"

"$kvtier" experiment "$work/tiny.toml" -o "$work/stopped" -j 1 --stop-after 2 > "$work/stop.log" 2>&1
rc=$?
[ "$rc" -eq 130 ] || fail "a stopped sweep must exit 130, got $rc: $(cat "$work/stop.log")"
[ "$(ls "$work/stopped/points" | wc -l)" -eq 2 ] || fail "expected 2 finished records, got $(ls "$work/stopped/points")"
[ ! -e "$work/stopped/results.csv" ] || fail "an unfinished sweep wrote results.csv"
"$kvtier" experiment "$work/tiny.toml" -o "$work/stopped" -j 2 > "$work/resume.log" 2>&1 || fail "resume: $(cat "$work/resume.log")"
grep -q "6 points: 2 finished before, 4 run now (0 failed)" "$work/resume.log" || fail "resume: $(cat "$work/resume.log")"
cmp "$work/clean/results.csv" "$work/stopped/results.csv" || fail "resumed results differ from a clean sweep's"

# A real interrupt: SIGINT once the first record exists.
"$kvtier" experiment "$work/tiny.toml" -o "$work/interrupted" -j 1 > "$work/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -n "$(ls "$work/interrupted/points" 2>/dev/null | grep -v '\.tmp\.')" ] && break
  sleep 0.05
done
kill -INT "$pid"
wait "$pid"
kept=$(ls "$work/interrupted/points" | grep -vc '\.tmp\.')
[ "$kept" -ge 1 ] || fail "no record survived the interrupt"
"$kvtier" experiment "$work/tiny.toml" -o "$work/interrupted" -j 2 > "$work/int2.log" 2>&1 || fail "$(cat "$work/int2.log")"
grep -q "6 points: $kept finished before, $((6 - kept)) run now" "$work/int2.log" || fail "$(cat "$work/int2.log")"
cmp "$work/clean/results.csv" "$work/interrupted/results.csv" || fail "results after an interrupt differ"
[ -z "$(ls "$work/interrupted/points" | grep '\.tmp\.')" ] || fail "temporary files left behind"
echo "resume: ok (interrupt kept $kept of 6)"
