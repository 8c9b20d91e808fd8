#!/bin/bash
# How fast demotions (HBM -> pinned DRAM, dma_2d) move beside the model's forward
# (docs/slot_placement.md). Run on the GPU machine from the repository root:
#   OUT=/some/dir bash bench/placement/demotion_link.sh              # both runs below, base first
#   G_RUNS=conn32 OUT=/some/dir bash bench/placement/demotion_link.sh   # only the second one
#   G_KV=path/to/kvtier    the binary to run (default build/kvtier)
#   G_CFG=path.toml        the config (default configs/real-model-h200.toml)
# Runs of the fidelity slice (kvtier run configs/real-model-h200.toml --device cuda
# --max-requests 40), each from an empty NVMe tier:
#   base   as the report ran it (CUDA's default of 8 hardware work queues), under
#          `nsys profile -t cuda` when nsys exists. Capture starts 40 s after launch (start-up
#          takes 15-45 s; the sim puts the demotions 28-45 s into the run) and lasts to the
#          end. The trace is then read per copy: how fast each 2 MiB strided copy runs, how
#          long copies sat queued on the GPU after cudaMemcpy2DAsync returned, what ended each
#          long wait, how the issue thread paced its calls, which kernels ran beside the
#          copies. Without nsys, the same run without the profiler.
#   conn32 CUDA_DEVICE_MAX_CONNECTIONS=32. The process has ~22 streams (20 in the mover's two
#          lanes, the forward's, the layer stager's) on 8 queues by default; if a demotion's
#          copies wait in a queue shared with the forward's stream (whose end-of-step copies
#          wait for the whole step), 32 queues remove that wait and pcie_d2h link_gbps rises
#          towards the link. No rebuild needed. Skipped when under 75 s are left (the nsys
#          run can take ~110 s): then run it alone with G_RUNS=conn32.
# Every run also logs `nvidia-smi dmon -s ut` (per-second SM use, PCIe rx/tx MB/s) and a
# per-thread `top` snapshot every 15 s from 30 s after launch.
# Outputs in $OUT: NAME.json NAME.txt NAME-steps.csv dmon-NAME.txt top-NAME.txt, summary.txt,
# nsys-analysis.txt. The nsys report and its SQLite export stay in /tmp/g-nsys (too large to
# bring back). At most G_BUDGET seconds (default 195; a cold machine's start-up alone can take 80 s).
set -u
OUT=${OUT:-/tmp/g-out}
mkdir -p "$OUT"
BIG=/tmp/g-nsys
mkdir -p "$BIG"
export LD_LIBRARY_PATH=$PWD/.carry/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
kv=${G_KV:-build/kvtier}
cfg=${G_CFG:-configs/real-model-h200.toml}
RUNS=${G_RUNS:-base conn32}
T0=$(date +%s)
BUDGET=${G_BUDGET:-195}
left() { echo $((BUDGET - ($(date +%s) - T0))); }

# Prefixes each line with the seconds since $1 (epoch seconds, float).
stamp() {
  command -v python3 >/dev/null || {
    cat
    return
  }
  python3 -u -c '
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    sys.stdout.write("%7.2f %s" % (time.time() - t0, line))
    sys.stdout.flush()' "$1"
}

# run_kv NAME LIMIT_S [PREFIX...]: one fidelity run; PREFIX (env, nsys ...) goes in front of kvtier.
run_kv() {
  local name=$1 limit=$2
  shift 2
  rm -f /var/tmp/kvtier-model-h200/kvtier.slots
  nvidia-smi dmon -s ut -d 1 -o T >"$OUT/dmon-$name.txt" 2>&1 &
  local dmon=$!
  local t
  t=$(date +%s.%N)
  (
    # Start-up takes 40-80 s: a snapshot every 15 s from 30 s on catches the run itself.
    for _ in 1 2 3 4 5 6 7 8; do
      sleep 15
      pid=$(pgrep -n -f "$(basename "$kv") run $cfg" || true)
      [ -n "$pid" ] && top -H -b -n 1 -p "$pid" 2>/dev/null | head -40 >>"$OUT/top-$name.txt"
    done
  ) &
  local snap=$!
  timeout "$limit" "$@" "$kv" run "$cfg" --device cuda --max-requests 40 --quiet \
    --json-out "$OUT/$name.json" --steps-csv "$OUT/$name-steps.csv" 2>&1 | stamp "$t" >"$OUT/$name.txt"
  local rc=${PIPESTATUS[0]}
  echo "rc=$rc after $(($(date +%s) - ${t%.*})) s (limit $limit s)" >>"$OUT/$name.txt"
  kill "$dmon" "$snap" 2>/dev/null
  wait "$dmon" "$snap" 2>/dev/null
  grep -E "NVMe tier|copy paths|link pcie_d2h|rc=" "$OUT/$name.txt" | cut -c1-420
  # The line about the NVMe tier is printed just before the run's clock starts.
  echo "start-up (model, copy-path calibration) took ~$(awk '/NVMe tier/ {print int($1); exit}' "$OUT/$name.txt") s"
}

analyze_trace() {
  timeout "$1" python3 - "$2" <<'EOF'
import sqlite3, sys, collections, bisect
db = sqlite3.connect(sys.argv[1])
def has(t):
    return db.execute("select count(*) from sqlite_master where name=?", (t,)).fetchone()[0] > 0
def cols(t):
    return [r[1] for r in db.execute("pragma table_info(%s)" % t)]
S = dict(db.execute("select id, value from StringIds")) if has("StringIds") else {}
MC, KE, RT = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
if not has(MC):
    print("no memcpy table: nothing captured (was the capture window after the run?)"); sys.exit(0)
kindname = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP"}
mcs = db.execute("select start, end, streamId, correlationId, bytes, copyKind from %s" % MC).fetchall()
kern = []
if has(KE):
    nc = "shortName" if "shortName" in cols(KE) else "demangledName"
    kern = db.execute("select start, end, streamId, %s from %s" % (nc, KE)).fetchall()
api = {}
if has(RT):
    ncol = "nameId" if "nameId" in cols(RT) else "name"
    for st, en, tid, corr, name in db.execute("select start, end, globalTid, correlationId, %s from %s" % (ncol, RT)):
        api[corr] = (st, en, tid, S.get(name, str(name)))
MiB = 1 << 20

# Streams: what each carried.
by_stream = collections.defaultdict(lambda: collections.Counter())
for st, en, sid, corr, b, k in mcs:
    by_stream[sid]["%s n" % kindname.get(k, k)] += 1
    by_stream[sid]["%s MiB" % kindname.get(k, k)] += b / MiB
ktime = collections.Counter()
for st, en, sid, name in kern:
    by_stream[sid]["kernels"] += 1
    ktime[sid] += (en - st) * 1e-9
compute_stream = max(ktime, key=ktime.get) if ktime else None
print("streams (id: what ran on it in the capture):")
for sid in sorted(by_stream):
    c = by_stream[sid]
    print("  %4s: %s%s" % (sid, ", ".join("%s %.0f" % (k, v) for k, v in sorted(c.items())),
          ", kernel time %.2f s" % ktime[sid] if ktime[sid] else ""))
print("compute stream (most kernel time): %s" % compute_stream)

mv = sorted([m for m in mcs if m[5] == 2 and m[4] >= 256 * 1024])  # the demotions' 2 MiB strided copies
if not mv:
    print("no large DtoH copies in the capture"); sys.exit(0)
mv_streams = sorted({m[2] for m in mv})
print("\ndemotion copies (DtoH >= 256 KiB): %d, %.2f GiB, on streams %s; sizes %s" % (len(mv),
      sum(m[4] for m in mv) / (1 << 30), mv_streams,
      dict(collections.Counter(m[4] for m in mv).most_common(3))))

def union(iv):
    iv = sorted((a, b) for a, b in iv if b > a)
    out = []
    for a, b in iv:
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out
def total(u):
    return sum(b - a for a, b in u)
def pct(v, ps=(10, 50, 90, 99)):
    v = sorted(v)
    return " ".join("p%d %.3g" % (p, v[min(len(v) - 1, int(p / 100 * len(v)))]) for p in ps) if v else "-"

nbytes = sum(m[4] for m in mv)
dur = [(m[1] - m[0]) * 1e-9 for m in mv]
rates = [m[4] / max(m[1] - m[0], 1) for m in mv]  # bytes/ns = GB/s
run_u = union([(m[0], m[1]) for m in mv])
T_run = total(run_u) * 1e-9
print("per copy: duration ms %s" % pct([d * 1e3 for d in dur]))
print("per copy: GB/s %s (two streams can share the engine: see the union)" % pct(rates))
print("union of the copies' execution: %.3f s -> %.2f GB/s while a demotion copy runs" % (T_run, nbytes / 1e9 / T_run))

# Waiting on the GPU: from the API call's return to the copy's start.
have_api = sum(1 for m in mv if m[3] in api)
if have_api:
    qd = [(m[0] - api[m[3]][1]) * 1e-9 for m in mv if m[3] in api]
    print("\nqueue delay (copy start - its cudaMemcpy2DAsync return), ms: %s; max %.2f; over 1 ms: %d of %d" % (
        pct([q * 1e3 for q in qd]), max(qd) * 1e3, sum(q > 1e-3 for q in qd), len(qd)))
    pend = [(api[m[3]][1], m[0]) for m in mv if m[3] in api]
    act_u = union(pend + [(m[0], m[1]) for m in mv])
    T_act = total(act_u) * 1e-9
    print("time with a demotion copy queued or running: %.3f s; running: %.3f s; queued, none running: %.3f s (%.0f%%)"
          % (T_act, T_run, T_act - T_run, 100 * (T_act - T_run) / max(T_act, 1e-9)))
    print("-> bytes over queued-or-running: %.2f GB/s (the GPU-timed figure is about this, plus host gaps inside"
          " a request)" % (nbytes / 1e9 / T_act))
    # What ended each long wait: the end of another stream's copy, of a kernel, or nothing seen.
    others = sorted((m[1], m[2], kindname.get(m[5], m[5]), m[4]) for m in mcs if m[2] not in mv_streams)
    oth_end = [o[0] for o in others]
    kends = sorted((k[1], k[2], k[3]) for k in kern)
    k_end = [k[0] for k in kends]
    mv_end = sorted(m[1] for m in mv)
    causes = collections.Counter()
    examples = []
    for m in mv:
        if m[3] not in api or m[0] - api[m[3]][1] < 500_000:
            continue
        i = bisect.bisect_right(oth_end, m[0]) - 1
        j = bisect.bisect_right(k_end, m[0]) - 1
        h = bisect.bisect_right(mv_end, m[0]) - 1
        near_copy = i >= 0 and m[0] - oth_end[i] < 30_000
        near_kernel = j >= 0 and m[0] - k_end[j] < 30_000
        if h >= 0 and m[0] - mv_end[h] < 30_000:
            causes["right after another demotion copy (queued behind its own lane: normal)"] += 1
        elif near_copy:
            o = others[i]
            causes["right after another stream's %s copy (stream %s)" % (o[2], o[1])] += 1
        elif near_kernel:
            causes["right after a kernel on stream %s" % kends[j][1]] += 1
        else:
            causes["after neither (within 30 us)"] += 1
        if len(examples) < 5:
            examples.append((m[0] - api[m[3]][1]) * 1e-6)
    if causes:
        print("copies that waited over 0.5 ms, and what ended just before each started:")
        for c, n in causes.most_common(8):
            print("  %5d  %s" % (n, c))
        print("  (waits of the first few, ms: %s)" % ", ".join("%.2f" % e for e in examples))
    # The issue thread: pacing and its waits.
    tids = collections.Counter(api[m[3]][2] for m in mv if m[3] in api)
    issue = tids.most_common(1)[0][0]
    calls = sorted((st, en, name) for st, en, tid, name in api.values() if tid == issue)
    cm = [c for c in calls if "Memcpy2D" in c[2]]
    print("\nissue thread %d: %d API calls; cudaMemcpy2DAsync host time us %s; over 1 ms: %d" % (issue & 0xFFFFFF,
          len(calls), pct([(c[1] - c[0]) * 1e-3 for c in cm]), sum(c[1] - c[0] > 1_000_000 for c in cm)))
    per = collections.defaultdict(float)
    for st, en, name in calls:
        per[name] += (en - st) * 1e-9
    print("  its API time by call: %s" % ", ".join("%s %.3f s" % (k, v) for k, v in
          sorted(per.items(), key=lambda x: -x[1])[:6]))
    gaps = [(cm[i + 1][0] - cm[i][1]) * 1e-6 for i in range(len(cm) - 1)]
    print("  gap between consecutive cudaMemcpy2DAsync calls, ms: %s" % pct(gaps, (50, 90, 99)))
    # Long mover calls: what the other threads were inside of at the time.
    long_calls = [c for c in calls if c[1] - c[0] > 1_000_000]
    if long_calls:
        other = collections.Counter()
        allapi = sorted((st, en, tid, name) for st, en, tid, name in api.values() if tid != issue)
        lng = [a for a in allapi if a[1] - a[0] > 1_000_000]  # few: scanned whole
        sht = [a for a in allapi if a[1] - a[0] <= 1_000_000]
        sstart = [a[0] for a in sht]
        for c in long_calls[:200]:
            hits = [a for a in lng if a[0] <= c[1] and a[1] > c[0]]
            i = bisect.bisect_left(sstart, c[0] - 1_000_000)
            while i < len(sht) and sht[i][0] <= c[1]:
                if sht[i][1] > c[0]:
                    hits.append(sht[i])
                i += 1
            for st, en, tid, name in hits:
                other["%s (thread %d)" % (name, tid & 0xFFFFFF)] += 1
        print("  %d issue-thread calls took over 1 ms (%s); calls of other threads overlapping them: %s" % (
              len(long_calls), ", ".join("%s x%d" % kv for kv in collections.Counter(c[2] for c in long_calls).most_common(3)),
              ", ".join("%s x%d" % kv for kv in other.most_common(5)) or "none"))
else:
    print("no runtime API records matched the copies (queue delays not known)")

# Kernels beside the copies.
if kern:
    k_u = union([(k[0], k[1]) for k in kern])
    ks = [a for a, b in k_u]
    def covered(a, b):
        i = max(bisect.bisect_right(ks, a) - 1, 0)
        c = 0
        while i < len(k_u) and k_u[i][0] < b:
            c += max(0, min(b, k_u[i][1]) - max(a, k_u[i][0]))
            i += 1
        return c
    groups = {"beside kernels (>=80% covered)": [0, 0], "no kernel (<=20% covered)": [0, 0], "partly": [0, 0]}
    for m in mv:
        f = covered(m[0], m[1]) / max(m[1] - m[0], 1)
        g = "beside kernels (>=80% covered)" if f >= 0.8 else "no kernel (<=20% covered)" if f <= 0.2 else "partly"
        groups[g][0] += m[4]
        groups[g][1] += m[1] - m[0]
    print("\ncopy rate by what ran beside it (bytes over summed durations):")
    for g, (b, d) in groups.items():
        if d:
            print("  %-32s %6.2f GiB at %5.2f GB/s" % (g, b / (1 << 30), b / d))
    # Which kernels the slowest tenth of the copies sat beside.
    slow = sorted(mv, key=lambda m: m[4] / max(m[1] - m[0], 1))[: max(1, len(mv) // 10)]
    names = collections.Counter()
    kst = sorted(kern)
    kstarts = [k[0] for k in kst]
    for m in slow:
        i = max(bisect.bisect_left(kstarts, m[0] - 50_000_000), 0)
        while i < len(kst) and kst[i][0] < m[1]:
            if kst[i][1] > m[0]:
                n = kst[i][3]
                names[S.get(n, str(n))[:60]] += min(m[1], kst[i][1]) - max(m[0], kst[i][0])
            i += 1
    print("kernels beside the slowest tenth of the copies (overlap ms): %s" % ", ".join(
        "%s %.1f" % (n, v * 1e-6) for n, v in names.most_common(6)))
    t0 = min(min(m[0] for m in mv), k_u[0][0])
    t1 = max(m[1] for m in mv)
    print("GPU kernel-busy over the copies' span: %.0f%%" % (100 * covered(t0, t1) / max(t1 - t0, 1)))

# One line a second: demoted bytes, copy time, queued-without-running time.
print("\nper second of the capture: GB moved, s running, s queued-none-running")
t_first = mv[0][0]
sec = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
for m in mv:
    sec[int((m[0] - t_first) * 1e-9)][0] += m[4] / 1e9
for a, b in run_u:
    sec[int((a - t_first) * 1e-9)][1] += (b - a) * 1e-9
if have_api:
    for a, b in act_u:
        sec[int((a - t_first) * 1e-9)][2] += (b - a) * 1e-9
    for a, b in run_u:
        sec[int((a - t_first) * 1e-9)][2] -= (b - a) * 1e-9
for s in sorted(sec):
    g, r, w = sec[s]
    print("  %3d  %6.2f GB  %5.3f s  %5.3f s%s" % (s, g, r, w, "  -> %.1f GB/s running" % (g / r) if r else ""))
EOF
}

summarize() {
  python3 - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(n):
    try:
        return json.load(open(os.path.join(out, n + ".json")))
    except Exception as e:
        return None
print("%-8s %9s %8s %10s %10s %8s %8s %9s %8s %8s" % ("run", "d2h GB", "reqs", "link_gbps", "busy_gbps", "util%",
      "wall s", "gpu_busy", "tpot50", "ttft50"))
for n in ("base", "conn32"):
    j = load(n)
    if not j:
        print("%-8s no JSON (the run did not finish: see %s.txt)" % (n, n)); continue
    d = j["links"]["pcie_d2h"]
    print("%-8s %9.2f %8d %10.2f %10.2f %8.1f %8.1f %9.2f %8.1f %8.0f" % (n, d["bytes"] / 1e9,
          d["dma_runs"]["batches"], d.get("link_gbps", 0), d["busy_gbps"], 100 * d["utilization"],
          j["wall_seconds"], j.get("gpu_busy", 0), j["tpot_ms"]["p50"], j["ttft_ms"]["p50"]))
print("reference (bench/results/2026-12-02-h200-fidelity-real.json): 62.73 GB, 715 requests, link 10.06, busy 6.39,"
      " util 22.2%, wall 44.2 s")
# nvidia-smi dmon: per-second PCIe tx (GPU -> host, MB/s) while demotions ran.
for n in ("base", "conn32"):
    p = os.path.join(out, "dmon-%s.txt" % n)
    if not os.path.exists(p): continue
    hdr, rows = None, []
    for line in open(p):
        f = line.split()
        if line.startswith("#") and "txpci" in line: hdr = [x.lstrip("#") for x in f]
        elif hdr and len(f) == len(hdr) and not line.startswith("#"): rows.append(dict(zip(hdr, f)))
    tx = [float(r["txpci"]) for r in rows if r.get("txpci", "-").replace(".", "").isdigit()]
    busy = sorted([x for x in tx if x > 2000], reverse=True)
    if busy:
        print("%-8s dmon txpci: %d s above 2 GB/s, mean of those %.1f GB/s, best 5 s: %s GB/s" % (n, len(busy),
              sum(busy) / len(busy) / 1e3, " ".join("%.1f" % (x / 1e3) for x in busy[:5])))
EOF
}

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current,clocks.sm,power.draw \
  --format=csv 2>&1 | head -3
echo "cores: $(nproc); python3: $(command -v python3 || echo none)"
NSYS=$(command -v nsys || true)
if [ -z "$NSYS" ]; then
  for p in /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-systems-cli/*/bin/nsys; do
    [ -x "$p" ] && NSYS=$p && break
  done
fi
echo "nsys: ${NSYS:-none} $([ -n "$NSYS" ] && "$NSYS" --version 2>/dev/null | head -1)"
[ -x "$kv" ] || {
  echo "no $kv here"
  exit 1
}

for r in $RUNS; do
  case $r in
    base)
      if [ -n "$NSYS" ]; then
        echo "== base: default queues, under nsys (capture from 40 s after launch to the end)"
        rm -f "$BIG"/g-base.*
        run_kv base $(($(left) - 35)) "$NSYS" profile -t cuda --sample=none --cpuctxsw=none --delay=40 \
          --export=sqlite --force-overwrite=true -o "$BIG/g-base"
        ls -la "$BIG" | tail -n +2
        if [ -s "$BIG/g-base.sqlite" ]; then
          echo "== nsys: the base run's demotions, per copy"
          analyze_trace $(($(left) > 30 ? $(left) : 30)) "$BIG/g-base.sqlite" | tee "$OUT/nsys-analysis.txt"
        fi
      else
        echo "== base: default queues (no nsys here)"
        run_kv base $(($(left) < 160 ? $(left) : 160))
      fi
      ;;
    conn32)
      echo "== conn32: CUDA_DEVICE_MAX_CONNECTIONS=32"
      if [ "$(left)" -ge 75 ]; then
        run_kv conn32 $(($(left) - 3)) env CUDA_DEVICE_MAX_CONNECTIONS=32
      else
        echo "skipped: $(left) s left; run it alone: G_RUNS=conn32 bash device_g.sh"
      fi
      ;;
  esac
done

echo "== side by side"
summarize | tee "$OUT/summary.txt"
echo "== done in $(($(date +%s) - T0)) s"
