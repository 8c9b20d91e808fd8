#!/usr/bin/env python3
"""Runs of adjacent slots per batch, by [cache] slot_placement, in one sitting.

For each placement ("eviction_order", the baseline, and "contiguous") it runs
  kvtier run CONFIG (the CPU twin unless --device says otherwise), interleaved, --repeats times, and
  kvtier sim on --sim-config (configs/default.toml, the embedded default) over the first
  --sim-requests requests (deterministic),
and prints, per link, blocks per run and runs per (demotion) batch with the ratio to the baseline,
plus the prefix hit ratio and evictions (placement must not change which block is evicted: the
simulation's must be identical). --json-out writes every number.

  bench/placement/contiguous_demotion.py build/kvtier --config configs/real-cpu.toml \
      --json-out bench/results/DATE-MACHINE-contiguous-demotion.json
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

PLACEMENTS = ["eviction_order", "contiguous"]
LINKS = ["pcie_d2h", "pcie_h2d", "nvme_write", "nvme_read"]


def with_placement(text, placement, nvme_dir):
    """The config's text with [cache] slot_placement set and its NVMe file in nvme_dir."""
    line = f'slot_placement = "{placement}"\n'
    if re.search(r"^\[cache\]\s*$", text, re.M):
        text = re.sub(r"^\[cache\]\s*$", "[cache]\n" + line.rstrip("\n"), text, count=1, flags=re.M)
    else:
        text += "\n[cache]\n" + line
    if nvme_dir:
        text = re.sub(r'^path\s*=.*$', f'path = "{nvme_dir}"\non_open = "reformat"', text, count=1, flags=re.M)
    return text


def summary(report):
    out = {"prefix_hit_ratio": report["prefix_hit_ratio"],
           "evictions": {t: report["tiers"][t]["evictions"] for t in ("hbm", "dram", "nvme")},
           "links": {}}
    for link in LINKS:
        l = report["links"][link]
        out["links"][link] = dict(l["dma_runs"], busy_gbps=l["busy_gbps"], limit_gbps=l["limit_gbps"],
                                  bytes=l["bytes"])
    return out


def run(cmd):
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")


def table(title, results):
    lines = [title]
    base = results["eviction_order"]
    for link in LINKS:
        b = base["links"][link]
        if b["batches"] == 0:
            continue
        for p in PLACEMENTS:
            r = results[p]["links"][link]
            ratio = r["blocks_per_run"] / b["blocks_per_run"] if b["blocks_per_run"] else 0
            demo = ""
            if r["demotion_batches"]:
                demo = (f"; demotion batches {r['demotion_batches']}: {r['runs_per_demotion_batch']:6.2f} runs each, "
                        f"{r['demotion_blocks_per_run']:6.1f} blocks per run")
            lines.append(f"  {link:<10} {p:<15} {r['blocks_per_run']:7.1f} blocks per run ({ratio:5.2f}x), "
                         f"{r['runs_per_batch']:7.2f} runs per batch ({r['batches']} batches){demo}; "
                         f"{r['busy_gbps']:.2f} GB/s while busy ({100 * r['busy_gbps'] / r['limit_gbps']:.1f}% of "
                         f"{r['limit_gbps']:.1f})")
    for p in PLACEMENTS:
        r = results[p]
        lines.append(f"  {p:<15} prefix hit ratio {r['prefix_hit_ratio']:.4f}, evictions "
                     + ", ".join(f"{t} {n}" for t, n in r["evictions"].items()))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kvtier")
    ap.add_argument("--config", default="configs/real-cpu.toml")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--max-requests", default="200")
    ap.add_argument("--time-scale", default="0.05")
    ap.add_argument("--compute-scale", default="0.1")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--sim-config", default="configs/default.toml")
    ap.add_argument("--sim-requests", default="2000")
    ap.add_argument("--nvme-dir", default="/var/tmp/kvtier-placement-bench")
    ap.add_argument("--json-out")
    a = ap.parse_args()

    real_text = pathlib.Path(a.config).read_text()
    out = {"what": "runs of adjacent lower-tier slots per batch, by [cache] slot_placement",
           "real": {"config": a.config, "device": a.device, "max_requests": a.max_requests,
                    "time_scale": a.time_scale, "compute_scale": a.compute_scale, "runs": []},
           "sim": {"config": a.sim_config, "max_requests": a.sim_requests}}
    with tempfile.TemporaryDirectory() as tmp:
        # The simulation: deterministic, so once each.
        sim = {}
        for p in PLACEMENTS:
            cfg = pathlib.Path(tmp, f"sim-{p}.toml")
            cfg.write_text(with_placement(pathlib.Path(a.sim_config).read_text(), p, None))
            js = pathlib.Path(tmp, f"sim-{p}.json")
            run([a.kvtier, "sim", str(cfg), "--quiet", "--max-requests", a.sim_requests, "--json-out", str(js)])
            sim[p] = summary(json.loads(js.read_text()))
        out["sim"]["results"] = sim
        print(table(f"kvtier sim {a.sim_config} --max-requests {a.sim_requests}:", sim))
        # The real runs, interleaved.
        for i in range(a.repeats):
            one = {}
            for p in PLACEMENTS:
                nvme = os.path.join(a.nvme_dir, p)
                os.makedirs(nvme, exist_ok=True)
                cfg = pathlib.Path(tmp, f"real-{p}.toml")
                cfg.write_text(with_placement(real_text, p, nvme))
                js = pathlib.Path(tmp, f"real-{p}.json")
                run([a.kvtier, "run", str(cfg), "--quiet", "--device", a.device, "--max-requests", a.max_requests,
                     "--time-scale", a.time_scale, "--compute-scale", a.compute_scale, "--json-out", str(js)])
                one[p] = summary(json.loads(js.read_text()))
            out["real"]["runs"].append(one)
            print(table(f"kvtier run {a.config} --device {a.device} --max-requests {a.max_requests} "
                        f"--time-scale {a.time_scale} --compute-scale {a.compute_scale}, round {i + 1}:", one))
    if a.json_out:
        pathlib.Path(a.json_out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
