#!/usr/bin/env python3
"""Compression from the model's own attention, measured in real runs (`kvtier run`, the model's CPU
twin or the CUDA twin): the uncompressed run first (the baseline, same trace slice, same weights),
then each policy at each keep ratio. Per run: blocks dropped and freed, the attention mass kept as
the model measured it (share of the last prompt query's mass on the kept blocks), and greedy token
agreement with the baseline (token_agreement.py's measure). Prints a table and writes JSON.

  compression_real.py KVTIER CONFIG.toml [--max-requests N] [--device cpu] [--policies a,b]
                      [--ratios 0.5,0.2] [--json OUT]
"""
import json
import os
import re
import subprocess
import sys
import tempfile


def arg(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def agreement(ref, var):
    same = total = identical = 0
    for rid, r in ref.items():
        a, b = r["tokens"], var.get(rid, {"tokens": []})["tokens"]
        total += len(a)
        same += sum(1 for x, y in zip(a, b) if x == y)
        identical += a == b
    return same / max(total, 1), identical, total


def run(kvtier, base_config, extra, argv, work, name):
    config = os.path.join(work, name + ".toml")
    nvme = os.path.join(work, name + "-nvme")
    os.makedirs(nvme)
    # Each run its own NVMe slot file: no run starts from blocks an earlier one kept.
    text = re.sub(r'(?m)^path = .*$', f'path = "{nvme}"', open(base_config).read())
    with open(config, "w") as f:
        f.write(text + "\n" + extra)
    report, tokens = os.path.join(work, name + ".json"), os.path.join(work, name + ".tokens.json")
    cmd = [kvtier, "run", config, "--device", arg(argv, "--device", "cpu"), "--max-requests",
           arg(argv, "--max-requests", "8"), "--quiet", "--json-out", report, "--tokens-out", tokens]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.load(open(report)), json.load(open(tokens))


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    kvtier, base = argv[1], argv[2]
    policies = arg(argv, "--policies", "h2o,snapkv,streaming_llm").split(",")
    ratios = [float(r) for r in arg(argv, "--ratios", "0.5,0.2").split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        ref_report, ref_tokens = run(kvtier, base, "", argv, work, "baseline")
        completed = ref_report["requests_completed"]
        print(f"baseline (no compression): {len(ref_tokens)} requests, "
              f"{sum(len(t['tokens']) for t in ref_tokens.values())} tokens generated")
        print(f"{'policy':<14} {'keep':>5} {'passes':>6} {'dropped':>8} {'freed':>6} {'mass kept':>9} "
              f"{'tokens same':>11} {'identical':>9}")
        for policy in policies:
            for ratio in ratios:
                extra = f'[compression]\npolicy = "{policy}"\nkeep_ratio = {ratio}\n'
                rep, toks = run(kvtier, base, extra, argv, work, f"{policy}-{ratio}")
                c = rep["compression"]
                same, identical, total = agreement(ref_tokens, toks)
                mass = c["measured_quality"]["mass_kept"] if c["measured_quality"] else None
                row = {"policy": policy, "keep_ratio": ratio, "passes": c["runs"],
                       "blocks_dropped": c["blocks_dropped"], "blocks_freed": c["blocks_freed"],
                       "stale_orders": c["stale_orders"], "measured_mass_kept": mass,
                       "modeled_mass_kept": c["modeled_quality"]["mass_kept"] if c["modeled_quality"] else None,
                       "token_agreement": same, "identical_requests": identical, "requests": len(ref_tokens),
                       "tokens": total}
                rows.append(row)
                mass_text = f"{mass:9.3f}" if mass is not None else f"{'n/a':>9}"
                print(f"{policy:<14} {ratio:5.2f} {c['runs']:6d} {c['blocks_dropped']:8d} {c['blocks_freed']:6d} "
                      f"{mass_text} {same:11.3f} {identical:5d}/{len(ref_tokens):<3d}")
    out = {"baseline": {"requests": len(ref_tokens), "completed": completed}, "runs": rows}
    if "--json" in argv:
        json.dump(out, open(arg(argv, "--json", ""), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
