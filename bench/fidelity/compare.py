#!/usr/bin/env python3
"""The simulator against a real run of the same config and trace slice (docs/fidelity.md).

  compare.py REAL.json SIM.json [SIM2.json ...] [--json OUT]

REAL.json is `kvtier run ... --json-out`, each SIM.json `kvtier sim ... --json-out` of the same
config with backend = "sim" (and, for a fair comparison, the hardware profile calibrated on the
machine the real run used: `kvtier calibrate --compute` for the forward, `kvtier nvme
--calibrate` for the slot file). Prints each metric, the simulated value's relative error and
whether it meets issue 13's goal (<= 5% on mean step, TTFT and TPOT p50, <= 10% on p99, link
bytes within 2%); the JSON holds the same rows. Exit status 0 whatever the errors: this measures.
"""
import json
import sys

# (label, how to read it, goal as a relative error or None)
def mean_step_ms(j):
    return 1000.0 * j["gpu_busy"] * j["simulated_seconds"] / max(j["steps"], 1)


METRICS = [
    ("mean step ms", mean_step_ms, 0.05),
    ("ttft p50 ms", lambda j: j["ttft_ms"]["p50"], 0.05),
    ("ttft p99 ms", lambda j: j["ttft_ms"]["p99"], 0.10),
    ("tpot p50 ms", lambda j: j["tpot_ms"]["p50"], 0.05),
    ("tpot p99 ms", lambda j: j["tpot_ms"]["p99"], 0.10),
    ("pcie_d2h GB", lambda j: j["links"]["pcie_d2h"]["bytes"] / 1e9, 0.02),
    ("pcie_h2d GB", lambda j: j["links"]["pcie_h2d"]["bytes"] / 1e9, 0.02),
    ("nvme_write GB", lambda j: j["links"]["nvme_write"]["bytes"] / 1e9, 0.02),
    ("nvme_read GB", lambda j: j["links"]["nvme_read"]["bytes"] / 1e9, 0.02),
    ("preemptions", lambda j: j["preemptions"]["swap"] + j["preemptions"]["recompute"], None),
    ("steps", lambda j: j["steps"], None),
    ("hbm evictions lost", lambda j: j["tiers"]["hbm"]["evictions_lost"], None),
    ("dram evictions lost", lambda j: j["tiers"]["dram"]["evictions_lost"], None),
    ("run seconds", lambda j: j["simulated_seconds"], None),
]


def main(argv):
    out = None
    if "--json" in argv:
        i = argv.index("--json")
        out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    if len(argv) < 3:
        print(__doc__)
        return 2
    real = json.load(open(argv[1]))
    sims = [(path, json.load(open(path))) for path in argv[2:]]
    rows = []
    header = f"{'metric':<20} {'real':>11}" + "".join(f" {'sim':>11} {'error':>8} {'goal':>6}" for _ in sims)
    print(header)
    for label, read, goal in METRICS:
        r = read(real)
        line = f"{label:<20} {r:>11.2f}"
        row = {"metric": label, "real": r, "goal": goal, "sims": []}
        for path, s in sims:
            v = read(s)
            err = (v - r) / r if r else (0.0 if v == r else None)
            met = None if goal is None or err is None else abs(err) <= goal
            line += f" {v:>11.2f} {('%+.1f%%' % (100 * err)) if err is not None else '—':>8}"
            line += f" {('met' if met else 'MISSED') if met is not None else '':>6}"
            row["sims"].append({"file": path, "value": v, "error": err, "met": met})
        print(line)
        rows.append(row)
    if out:
        json.dump({"real": argv[1], "rows": rows}, open(out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
