#!/usr/bin/env bash
# bench/model on a CUDA machine in one call: builds kvtier's paged decode and
# chunked-prefill attention for sm_90, checks them against float64 on the CPU,
# times them, runs the PyTorch baseline (bench/model/torch_baseline.py) in the
# same call, and prints kvtier's kernels beside PyTorch's SDPA with the ratio.
#   OUT=dir bench/model/run-gpu.sh    logs and JSON go to $OUT
#   KVTIER_TORCH_PARTS=ceilings,attention,prefill_attention,decode,prefill   what the baseline runs
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${OUT:-/tmp/kvtier-model-out}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
cd "$root"
echo "== machine"; date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv || true
echo "== build"
"$cuda/bin/nvcc" -O3 -std=c++20 -gencode=arch=compute_90,code=sm_90 -I. -Xptxas -v \
  kernels/model/cuda/paged_decode.cu kernels/model/cuda/paged_decode_tc.cu kernels/model/cuda/paged_decode_bench.cu \
  -o "$out/paged_decode_bench" > "$out/build.txt" 2>&1 || { cat "$out/build.txt"; echo BUILD FAILED; exit 1; }
# The prefill bench for sm_90a: the Hopper (wgmma) kernel beside the mma.sync one.
"$cuda/bin/nvcc" -O3 -std=c++20 -gencode=arch=compute_90a,code=sm_90a -DKVTIER_PREFILL_WGMMA=1 -I. -Xptxas -v \
  kernels/model/cuda/paged_prefill_tc.cu kernels/model/cuda/paged_prefill_wgmma.cu kernels/model/cuda/model_kernels.cu \
  kernels/model/cuda/paged_decode.cu kernels/model/cuda/paged_prefill_bench.cu \
  -o "$out/paged_prefill_bench" >> "$out/build.txt" 2>&1 || { cat "$out/build.txt"; echo BUILD FAILED; exit 1; }
grep -E "registers|spill" "$out/build.txt" | sort | uniq -c | head
echo "== kvtier paged decode attention: check and time"
for kernel in tc simt; do
  "$out/paged_decode_bench" --kernel $kernel --json "$out/kvtier_attention_$kernel.json" | tee "$out/kvtier_attention_$kernel.txt"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "CHECK FAILED ($kernel)"; exit 1; }
done
echo "== kvtier chunked-prefill attention: check and time (beside the CUDA-core kernel)"
"$out/paged_prefill_bench" --json "$out/kvtier_prefill.json" | tee "$out/kvtier_prefill.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "CHECK FAILED (prefill)"; exit 1; }
echo "== PyTorch baseline"
python3 bench/model/torch_baseline.py --json "$out/torch_baseline.json" \
  --parts "${KVTIER_TORCH_PARTS:-ceilings,attention,prefill_attention,decode,prefill}" > "$out/torch_baseline.txt" 2>&1
rc=$?; tail -5 "$out/torch_baseline.txt"; [ $rc = 0 ] || echo "BASELINE FAILED rc=$rc"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
ours = {(r["batch"], r["context"]): r for r in json.load(open(f"{out}/kvtier_attention_tc.json"))}
simt = {(r["batch"], r["context"]): r for r in json.load(open(f"{out}/kvtier_attention_simt.json"))}
base = json.load(open(f"{out}/torch_baseline.json"))
copy = base.get("ceilings", {}).get("copy_gbps_read_plus_write")
rows = []
print(f"\n{'batch':>5} {'context':>7} {'kvtier us':>10} {'sdpa us':>9} {'speedup':>8} {'kvtier GB/s':>11} {'of copy':>8}")
for r in base["results"]:
    if r.get("kernel") != "torch_sdpa_decode": continue
    k = ours.get((r["batch"], r["context"]))
    if not k: continue
    ratio = r["median_us"] / k["median_us"]
    share = k["gbps"] / copy if copy else None
    rows.append({"batch": r["batch"], "context": r["context"], "kvtier_us": k["median_us"], "sdpa_us": r["median_us"],
                 "kvtier_simt_us": simt[(r["batch"], r["context"])]["median_us"],
                 "speedup_vs_sdpa": ratio, "kvtier_gbps": k["gbps"], "share_of_copy_rate": share})
    print(f"{r['batch']:5d} {r['context']:7d} {k['median_us']:10.1f} {r['median_us']:9.1f} {ratio:8.2f} {k['gbps']:11.0f} "
          f"{share if share else 0:8.2f}")
prefill = {(r["chunk"], r["cached"]): r for r in json.load(open(f"{out}/kvtier_prefill.json"))}
prefill_rows = []
print(f"\n{'chunk':>5} {'cached':>7} {'kvtier us':>10} {'sdpa us':>9} {'kvtier/sdpa':>11} {'kvtier TFLOPS':>13}")
for r in base["results"]:
    if r.get("kernel") != "torch_sdpa_prefill": continue
    k = prefill.get((r["chunk"], r["cached"]))
    if not k: continue
    ratio = k["median_us"] / r["median_us"]
    prefill_rows.append({"chunk": r["chunk"], "cached": r["cached"], "kvtier_us": k["median_us"],
                         "sdpa_us": r["median_us"], "time_vs_sdpa": ratio, "kvtier_tflops": k["tflops"],
                         "sdpa_tflops": r["tflops"], "cuda_core_us": k["cuda_core_us"]})
    print(f"{r['chunk']:5d} {r['cached']:7d} {k['median_us']:10.1f} {r['median_us']:9.1f} {ratio:11.2f} {k['tflops']:13.1f}")
json.dump({"ceilings": base.get("ceilings"), "attention": rows, "prefill_attention": prefill_rows},
          open(f"{out}/summary.json", "w"), indent=1)
PY
