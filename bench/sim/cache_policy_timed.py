#!/usr/bin/env python3
"""Timed runs by cache policy: `kvtier sim` on the embedded default config
(configs/default.toml, the bundled Mooncake conversation trace) with each
[cache] policy, against the LRU run of the same config in the same session.

Per tier (HBM; HBM+DRAM; all) the prefix hit ratio, LRU's, Belady's bound for
the same memory (from the LRU run's standing, over the same trace) and the
share of the LRU->Belady gap closed; TTFT p50/p99 and their change against
LRU. Prints a table and writes JSON.

usage: bench/sim/cache_policy_timed.py KVTIER OUT_PREFIX [--max-requests N] [--policies a,b,...]
Run from the source root; writes OUT_PREFIX.txt and OUT_PREFIX.json.
"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile

TIERS = ["hbm", "dram", "nvme"]


def run(kvtier, policy, work, max_requests, bound):
    with open("configs/default.toml") as f:
        text = f.read()
    text, n = re.subn(r'(?m)^policy = "[a-z0-9]+"', f'policy = "{policy}"', text)
    assert n == 1, "configs/default.toml: expected one [cache] policy line"
    cfg = os.path.join(work, f"{policy}.toml")
    with open(cfg, "w") as f:
        f.write(text)
    out = os.path.join(work, f"{policy}.json")
    cmd = [kvtier, "sim", cfg, "--quiet", "--json-out", out]
    if max_requests:
        cmd += ["--max-requests", str(max_requests)]
    if not bound:
        cmd.append("--no-bound")
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    with open(out) as f:
        j = json.load(f)
    j["_cpu_seconds"] = cpu
    return j


def through(j):
    """Hit ratio through each tier: hits in it or above, over all lookups."""
    by = j["prefix_hits_by_tier"]
    acc, out = 0.0, []
    for t in TIERS:
        acc += by.get(t, 0.0)
        out.append(acc)
    return out


def main():
    args = sys.argv[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    kvtier, prefix = args[0], args[1]
    max_requests = 0
    policies = ["s3fifo", "arc", "lfuda", "predictor"]
    if "--max-requests" in args:
        max_requests = int(args[args.index("--max-requests") + 1])
    if "--policies" in args:
        policies = args[args.index("--policies") + 1].split(",")
    work = tempfile.mkdtemp(prefix="kvtier-policy-timed-")
    lru = run(kvtier, "lru", work, max_requests, bound=True)
    belady = [lru["policy"]["tiers"][t]["belady_hit_ratio_through"] if t in lru["policy"]["tiers"] else None
              for t in TIERS]
    lru_through = through(lru)
    rows = [("lru", lru)] + [(p, run(kvtier, p, work, max_requests, bound=False)) for p in policies]
    lines = [
        "kvtier sim, embedded default config (Llama-3-8B on H200, exclusive, demote_watermark 0.2, 16-token blocks), "
        f"{lru['trace']}, {lru['requests_completed']} requests; each [cache] policy against LRU in the same session",
        "per tier: prefix hit ratio through that tier / gap = share of the LRU -> Belady gap closed "
        f"(Belady through hbm / +dram / +nvme: {belady[0]:.4f} / {belady[1]:.4f} / {belady[2]:.4f})",
        f"{'policy':<10} {'hbm':>8} {'gap':>7} {'+dram':>8} {'gap':>7} {'+nvme':>8} {'gap':>7}"
        f" {'TTFT p50 ms':>12} {'vs LRU':>7} {'TTFT p99 ms':>12} {'vs LRU':>7} {'CPU s':>6}",
    ]
    report = {"trace": lru["trace"], "requests": lru["requests_completed"], "belady_through": belady, "policies": {}}
    for name, j in rows:
        th = through(j)
        gaps = []
        for i in range(3):
            g = belady[i] - lru_through[i]
            gaps.append((th[i] - lru_through[i]) / g if g > 1e-12 else None)
        p50, p99 = j["ttft_ms"]["p50"], j["ttft_ms"]["p99"]
        d50 = p50 / lru["ttft_ms"]["p50"] - 1
        d99 = p99 / lru["ttft_ms"]["p99"] - 1
        cells = "".join(f" {th[i]:>8.4f} {(f'{100 * gaps[i]:.1f}%' if gaps[i] is not None else 'n/a'):>7}"
                        for i in range(3))
        lines.append(f"{name:<10}{cells} {p50:>12.1f} {100 * d50:>+6.1f}% {p99:>12.1f} {100 * d99:>+6.1f}%"
                     f" {j['_cpu_seconds']:>6.1f}")
        report["policies"][name] = {
            "hit_ratio_through": dict(zip(TIERS, th)),
            "gap_closed_through": dict(zip(TIERS, gaps)),
            "ttft_ms": j["ttft_ms"],
            "ttft_p50_change_vs_lru": d50,
            "ttft_p99_change_vs_lru": d99,
            "evictions_lost": {t: j["tiers"][t].get("evictions_lost") for t in TIERS if t in j["tiers"]},
            "cpu_seconds": j["_cpu_seconds"],
        }
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(prefix + ".txt", "w") as f:
        f.write(text)
    with open(prefix + ".json", "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
