#!/usr/bin/env python3
"""The actor graph's share of a decode step (issue goal: <= 2% at batch 128), from `kvtier run`'s
per-step CSV: `batch` requests arrive at once (prompt and output lengths below, distinct prompts), and
for every decode step of the full batch the gap is the next step's plan time minus this step's plan
time and port time (what the scheduler, block manager and messages add between two forwards). Runs
each binary given, alternately (A B A B ...) so that drift on the machine falls on both, and prints
per binary the gap's p50 and mean and its share of the step, then the ratio of the last binary's mean
gap to the first's, and JSON.

  actor_gap.py CONFIG.toml KVTIER [KVTIER ...] [--rounds 2] [--batch 128] [--prompt 1024]
               [--output 512] [--device cuda] [--json OUT]
"""
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile


def option(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def write_trace(path, batch, prompt, output):
    blocks = (prompt + 511) // 512  # Mooncake hash ids name 512-token blocks
    with open(path, "w") as f:
        for r in range(batch):
            ids = [r * blocks + b for b in range(blocks)]
            f.write(json.dumps({"timestamp": 0, "input_length": prompt, "output_length": output, "hash_ids": ids}) + "\n")


def gaps(steps_csv, batch):
    rows = list(csv.DictReader(open(steps_csv)))
    out, step = [], []
    for a, b in zip(rows, rows[1:]):
        if int(a["batch"]) != batch or int(a["prefill_tokens"]) != 0 or int(b["prefill_tokens"]) != 0:
            continue
        t, s = float(a["time_s"]), float(a["step_s"])
        out.append(float(b["time_s"]) - t - s)
        step.append(s)
    return out, step


def main(argv):
    positional = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or not argv[i - 1].startswith("--"))]
    if len(positional) < 2:
        print(__doc__)
        return 2
    config, binaries = positional[0], positional[1:]
    rounds = int(option(argv, "--rounds", "2"))
    batch = int(option(argv, "--batch", "128"))
    prompt, output = int(option(argv, "--prompt", "1024")), int(option(argv, "--output", "512"))
    device = option(argv, "--device", "cuda")
    work = tempfile.mkdtemp(prefix="kvtier-gap-")
    trace = os.path.join(work, "batch.jsonl")
    write_trace(trace, batch, prompt, output)
    per = {b: {"gaps": [], "steps": []} for b in binaries}
    base = open(config).read()
    for r in range(rounds):
        for i, binary in enumerate(binaries):
            steps = os.path.join(work, f"steps-{i}-{r}.csv")
            # Each run its own NVMe slot file: a run that recovered the previous one's blocks would
            # hit its prompts there and run a different schedule.
            nvme = os.path.join(work, f"nvme-{i}-{r}")
            os.makedirs(nvme)
            run_config = os.path.join(work, f"config-{i}-{r}.toml")
            with open(run_config, "w") as f:
                f.write(re.sub(r'(?m)^path = .*$', f'path = "{nvme}"', base))
            cmd = [binary, "run", run_config, "--device", device, "--trace", trace, "--steps-csv", steps]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
                return 1
            g, s = gaps(steps, batch)
            shutil.rmtree(nvme, ignore_errors=True)
            per[binary]["gaps"] += g
            per[binary]["steps"] += s
            print(f"round {r} {binary}: {len(g)} decode steps of batch {batch}, gap p50 {statistics.median(g) * 1e6:.0f} us "
                  f"mean {statistics.mean(g) * 1e6:.0f} us, step p50 {statistics.median(s) * 1e3:.2f} ms", flush=True)
    result = []
    for binary in binaries:
        g, s = per[binary]["gaps"], per[binary]["steps"]
        share = statistics.mean(g) / statistics.mean(s)
        result.append({"binary": binary, "decode_steps": len(g), "gap_p50_us": statistics.median(g) * 1e6,
                       "gap_mean_us": statistics.mean(g) * 1e6, "step_p50_ms": statistics.median(s) * 1e3,
                       "gap_share_of_step": share})
        print(f"{binary}: gap p50 {result[-1]['gap_p50_us']:.0f} us, mean {result[-1]['gap_mean_us']:.0f} us = "
              f"{share * 100:.2f}% of a step (goal <= 2%)")
    if len(result) > 1:
        ratio = result[-1]["gap_mean_us"] / result[0]["gap_mean_us"]
        print(f"mean gap, last / first: {ratio:.3f}")
    if "--json" in argv:
        with open(option(argv, "--json", ""), "w") as f:
            json.dump({"batch": batch, "prompt": prompt, "output": output, "runs": result}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
