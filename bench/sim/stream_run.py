#!/usr/bin/env python3
"""One long-context request through the simulated backend: streaming against promote-only.

One request of --context tokens (Llama-3-8B geometry, --output tokens out) is replayed by
`kvtier sim` with
  all-HBM       an HBM pool that holds the whole context (the baseline: no PCIe traffic),
  stream        an HBM pool that holds --hbm-share of it, cold blocks streamed from DRAM,
  promote-only  the same HBM with [cache] stream_from_dram = false (refused: it cannot fit),
and prints per variant TTFT, the decode step time (TPOT), the PCIe host-to-device bytes and the
streamed bytes, the decode step's ratio to all-HBM, and what a step's copy alone takes at the
link's limit (the prediction: a decode step lasts max(compute, copy) + one layer's copy).
--json-out writes every number.

  bench/sim/stream_run.py build/kvtier --json-out bench/results/DATE-MACHINE-stream-run.json
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # Llama-3-8B, bf16: K and V, 32 layers, 8 KV heads, head_dim 128


def config_text(hbm_bytes, stream, chunk, dram_bytes):
    return f"""[model]
preset = "llama-3-8b"
[tiers.hbm]
capacity = "{hbm_bytes}B"
[tiers.dram]
capacity = "{dram_bytes}B"
[tiers.nvme]
enabled = false
[cache]
stream_from_dram = {"true" if stream else "false"}
[scheduler]
prefill_chunk = {chunk}
"""


def run(kvtier, cfg, trace, tmp, name):
    cfg_path = tmp / f"{name}.toml"
    out = tmp / f"{name}.json"
    cfg_path.write_text(cfg)
    cmd = [kvtier, "sim", str(cfg_path), "--trace", str(trace), "--format", "azure", "--quiet", "--no-bound",
           "--json-out", str(out)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(out.read_text())


def summary(r):
    h2d = r["links"]["pcie_h2d"]
    st = r.get("streaming", {})
    return {
        "completed": r["requests_completed"],
        "rejected": r["requests_rejected"],
        "rejections": r.get("rejections", []),
        "ttft_ms": r["ttft_ms"]["p50"],
        "tpot_ms": r["tpot_ms"]["p50"],
        "steps": r["steps"],
        "pcie_h2d_bytes": h2d["bytes"],
        "pcie_h2d_utilization": h2d["utilization"],
        "pcie_h2d_limit_gbps": h2d["limit_gbps"],
        "pcie_d2h_bytes": r["links"]["pcie_d2h"]["bytes"],
        "streamed_bytes": st.get("streamed_bytes", 0),
        "streamed_blocks": st.get("streamed_blocks", 0),
        "streamed_steps": st.get("streamed_steps", 0),
        "spilled_blocks": st.get("spilled_blocks", 0),
        "preemptions": r["preemptions"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvtier")
    p.add_argument("--context", type=int, default=65536)
    p.add_argument("--output", type=int, default=128)
    p.add_argument("--hbm-share", type=float, nargs="+", default=[0.5, 0.25])
    p.add_argument("--chunk", type=int, default=2048)
    p.add_argument("--json-out")
    a = p.parse_args()
    total = a.context + a.output
    kv = total * KV_BYTES_PER_TOKEN
    dram = 2 * kv
    results = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = pathlib.Path(d)
        trace = tmp / "long.csv"
        trace.write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,{a.context},{a.output}\n")
        results["all-HBM"] = summary(run(a.kvtier, config_text(2 * kv, True, a.chunk, dram), trace, tmp, "all"))
        for share in a.hbm_share:
            hbm = int(kv * share)
            results[f"stream {share:g}"] = summary(run(a.kvtier, config_text(hbm, True, a.chunk, dram), trace, tmp,
                                                     f"stream{share}"))
            results[f"promote-only {share:g}"] = summary(
                run(a.kvtier, config_text(hbm, False, a.chunk, dram), trace, tmp, f"promote{share}"))
    base = results["all-HBM"]["tpot_ms"]
    print(f"one request of {a.context} tokens + {a.output} out, Llama-3-8B bf16 ({kv / 2**30:.2f} GiB of K/V), "
          f"prefill chunk {a.chunk}; simulated H200")
    print(f"{'variant':<18} {'done':>4} {'TTFT ms':>10} {'TPOT ms':>9} {'x all-HBM':>9} {'PCIe H2D':>11} "
          f"{'streamed':>11} {'busy':>6} {'copy/step ms':>12}")
    for name, r in results.items():
        if r["completed"] == 0:
            print(f"{name:<18} {0:>4} refused: {r['rejections'][0] if r['rejections'] else ''}")
            continue
        per_step = r["streamed_bytes"] / max(r["streamed_steps"], 1)
        copy_ms = per_step / (r["pcie_h2d_limit_gbps"] * 1e9) * 1e3 if r["streamed_steps"] else 0
        r["copy_ms_per_streamed_step_at_limit"] = copy_ms
        r["tpot_vs_all_hbm"] = r["tpot_ms"] / base if base else 0
        print(f"{name:<18} {r['completed']:>4} {r['ttft_ms']:>10.1f} {r['tpot_ms']:>9.2f} {r['tpot_vs_all_hbm']:>9.2f} "
              f"{r['pcie_h2d_bytes'] / 2**30:>8.2f} GiB {r['streamed_bytes'] / 2**30:>7.2f} GiB "
              f"{100 * r['pcie_h2d_utilization']:>5.1f}% {copy_ms:>12.2f}")
    if a.json_out:
        pathlib.Path(a.json_out).write_text(json.dumps({"context": a.context, "output": a.output, "chunk": a.chunk,
                                                        "kv_bytes": kv, "variants": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
