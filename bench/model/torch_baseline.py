#!/usr/bin/env python3
"""PyTorch baseline for bench/model, run on the GPU machine in the same call as
kvtier's kernels: Llama-3-8B geometry with random bf16 weights.

  attention  SDPA decode attention alone (GQA, contiguous KV), the shapes of
             kernels/model/cuda/paged_decode_bench, with the bytes it must read
  decode     one whole decode step, captured in a CUDA graph (as production
             engines run it), batch x context where the KV cache fits
  prefill    one chunk after a cached prefix, batch 1
  prefill_attention  SDPA over one chunk after a cached prefix, alone (GQA,
             contiguous KV, lower-right causal mask on the flash kernel), the
             shapes of kernels/model/cuda/paged_prefill_bench
  ceilings   device-to-device copy rate and a large bf16 matrix product

Writes JSON to --json and prints a table. Times are medians of CUDA-event
timings after warm-up; inputs are random, never zeros."""
import argparse, json, math, time
import torch
import torch.nn.functional as F

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 4096, 32, 32, 8, 128, 14336, 128256
ROPE_THETA = 500000.0
dev = torch.device("cuda")
bf16 = torch.bfloat16


def median_ms(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def ceilings():
    x = torch.randn(1 << 30, device=dev, dtype=bf16)  # 2 GiB
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x), reps=10)
    copy_gbps = 2 * x.numel() * 2 / (ms * 1e-3) / 1e9
    del x, y
    a = torch.randn(8192, 8192, device=dev, dtype=bf16)
    b = torch.randn(8192, 8192, device=dev, dtype=bf16)
    ms = median_ms(lambda: a @ b, reps=10)
    return {"copy_gbps_read_plus_write": copy_gbps, "gemm_bf16_tflops": 2 * 8192**3 / (ms * 1e-3) / 1e12}


def attention(batch, context):
    per_layer = batch * context * KV_HEADS * HEAD_DIM * 2 * 2
    copies = max(1, math.ceil((512 << 20) / per_layer))  # rotate so L2 holds none of it
    ks = [torch.randn(batch, KV_HEADS, context, HEAD_DIM, device=dev, dtype=bf16) for _ in range(copies)]
    vs = [torch.randn_like(k) for k in ks]
    q = torch.randn(batch, HEADS, 1, HEAD_DIM, device=dev, dtype=bf16)
    i = [0]

    def step():
        j = i[0] % copies; i[0] += 1
        F.scaled_dot_product_attention(q, ks[j], vs[j], enable_gqa=True)

    per = max(3, min(50, 2 * copies))
    ms = median_ms(lambda: [step() for _ in range(per)], reps=7) / per
    del ks, vs
    return {"kernel": "torch_sdpa_decode", "batch": batch, "context": context, "median_us": ms * 1e3,
            "gbps": (per_layer + 2 * batch * HEADS * HEAD_DIM * 2) / (ms * 1e-3) / 1e9}


def prefill_attention(chunk, cached):
    from torch.nn.attention.bias import causal_lower_right
    total = cached + chunk
    q = torch.randn(1, HEADS, chunk, HEAD_DIM, device=dev, dtype=bf16)
    k = torch.randn(1, KV_HEADS, total, HEAD_DIM, device=dev, dtype=bf16)
    v = torch.randn_like(k)
    mask = causal_lower_right(chunk, total)
    try:
        F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        how = "enable_gqa"
    except (TypeError, RuntimeError):  # the causal bias without GQA: repeat the heads once, outside the timing
        k, v = k.repeat_interleave(HEADS // KV_HEADS, 1), v.repeat_interleave(HEADS // KV_HEADS, 1)
        how = "repeated heads"
    gqa = how == "enable_gqa"
    ms = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa), reps=7, warm=2)
    flops = 4.0 * HEADS * HEAD_DIM * sum(cached + t + 1 for t in range(chunk))
    return {"kernel": "torch_sdpa_prefill", "chunk": chunk, "cached": cached, "median_us": ms * 1e3,
            "tflops": flops / (ms * 1e-3) / 1e12, "gqa": how}


class Model:
    def __init__(self):
        g = torch.Generator(device=dev); g.manual_seed(0)
        r = lambda *s: (torch.randn(*s, device=dev, dtype=bf16, generator=g) * 0.02)
        self.embed = r(VOCAB, HIDDEN)
        self.layers = []
        for _ in range(LAYERS):
            self.layers.append(dict(
                qkv=r((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), o=r(HIDDEN, HEADS * HEAD_DIM),
                gate_up=r(2 * FFN, HIDDEN), down=r(HIDDEN, FFN),
                n1=torch.ones(HIDDEN, device=dev, dtype=bf16), n2=torch.ones(HIDDEN, device=dev, dtype=bf16)))
        self.norm = torch.ones(HIDDEN, device=dev, dtype=bf16)
        self.head = r(VOCAB, HIDDEN)
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, device=dev, dtype=torch.float32) / HEAD_DIM))
        pos = torch.arange(0, 131072, device=dev, dtype=torch.float32)
        f = torch.outer(pos, inv)
        self.cos, self.sin = f.cos(), f.sin()

    def rope(self, x, positions):  # x [B, H, T, D], positions [B, T]
        c, s = self.cos[positions].unsqueeze(1), self.sin[positions].unsqueeze(1)
        x1, x2 = x.float()[..., ::2], x.float()[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), -1).flatten(-2).to(bf16)

    def forward(self, tokens, positions, caches, cached, mask=None):
        """tokens [B, T]; caches per layer (k, v) [B, KV, ctx_max, D]; attends [0, cached + T)."""
        B, T = tokens.shape
        h = self.embed[tokens]
        for layer, (kc, vc) in zip(self.layers, caches):
            x = F.rms_norm(h, (HIDDEN,), layer["n1"], 1e-5)
            qkv = F.linear(x, layer["qkv"])
            q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], -1)
            q = self.rope(q.view(B, T, HEADS, HEAD_DIM).transpose(1, 2), positions)
            k = self.rope(k.view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2), positions)
            kc[:, :, cached:cached + T] = k
            vc[:, :, cached:cached + T] = v.view(B, T, KV_HEADS, HEAD_DIM).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, kc[:, :, :cached + T], vc[:, :, :cached + T], attn_mask=mask,
                                               enable_gqa=True)
            h = h + F.linear(a.transpose(1, 2).reshape(B, T, HEADS * HEAD_DIM), layer["o"])
            x = F.rms_norm(h, (HIDDEN,), layer["n2"], 1e-5)
            gu = F.linear(x, layer["gate_up"])
            gate, up = gu.chunk(2, -1)
            h = h + F.linear(F.silu(gate) * up, layer["down"])
        return F.linear(F.rms_norm(h[:, -1], (HIDDEN,), self.norm, 1e-5), self.head)


def kv_bytes(batch, tokens):
    return LAYERS * batch * tokens * KV_HEADS * HEAD_DIM * 2 * 2


def decode(model, batch, context, budget):
    if kv_bytes(batch, context + 1) > budget:
        return {"phase": "decode", "batch": batch, "context": context, "skipped": "KV does not fit"}
    caches = [(torch.randn(batch, KV_HEADS, context + 1, HEAD_DIM, device=dev, dtype=bf16),
               torch.randn(batch, KV_HEADS, context + 1, HEAD_DIM, device=dev, dtype=bf16)) for _ in range(LAYERS)]
    tokens = torch.randint(0, VOCAB, (batch, 1), device=dev)
    positions = torch.full((batch, 1), context, device=dev)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            model.forward(tokens, positions, caches, context)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        logits = model.forward(tokens, positions, caches, context)
    ms = median_ms(graph.replay, reps=15)
    del graph, caches, logits
    torch.cuda.empty_cache()
    return {"phase": "decode", "batch": batch, "context": context, "step_ms": ms, "graph": True}


def prefill(model, chunk, cached, budget):
    total = cached + chunk
    if kv_bytes(1, total) > budget:
        return {"phase": "prefill", "chunk": chunk, "cached": cached, "skipped": "KV does not fit"}
    caches = [(torch.randn(1, KV_HEADS, total, HEAD_DIM, device=dev, dtype=bf16),
               torch.randn(1, KV_HEADS, total, HEAD_DIM, device=dev, dtype=bf16)) for _ in range(LAYERS)]
    tokens = torch.randint(0, VOCAB, (1, chunk), device=dev)
    positions = torch.arange(cached, total, device=dev).unsqueeze(0)
    # A chunk attends its whole cached prefix and causally within itself.
    mask = torch.ones(chunk, total, device=dev, dtype=torch.bool).tril(diagonal=cached)
    ms = median_ms(lambda: model.forward(tokens, positions, caches, cached, mask), reps=7, warm=2)
    del caches
    torch.cuda.empty_cache()
    return {"phase": "prefill", "chunk": chunk, "cached": cached, "step_ms": ms, "tokens_per_s": chunk / (ms * 1e-3)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="torch_baseline.json")
    ap.add_argument("--parts", default="ceilings,attention,decode,prefill")
    args = ap.parse_args()
    parts = args.parts.split(",")
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": []}
    t0 = time.time()
    if "ceilings" in parts:
        out["ceilings"] = ceilings(); print("ceilings", out["ceilings"], flush=True)
    if "attention" in parts:
        for b in (1, 8, 32, 128):
            for c in (1024, 4096, 16384, 32768):
                r = attention(b, c); out["results"].append(r)
                print(f"attention b={b:4d} ctx={c:6d} {r['median_us']:9.1f} us {r['gbps']:7.0f} GB/s", flush=True)
    if "prefill_attention" in parts:
        for chunk in (512, 2048, 8192):
            for cached in (0, 8192, 32768, 65536):
                r = prefill_attention(chunk, cached); out["results"].append(r)
                print(f"prefill attention n={chunk:5d} after {cached:6d} {r['median_us']:10.1f} us "
                      f"{r['tflops']:6.1f} TFLOPS ({r['gqa']})", flush=True)
    if "decode" in parts or "prefill" in parts:
        model = Model()
        free, _ = torch.cuda.mem_get_info()
        budget = free - (8 << 30)
        if "decode" in parts:
            for b in (1, 8, 32, 128):
                for c in (1024, 4096, 16384, 32768):
                    r = decode(model, b, c, budget); out["results"].append(r)
                    print("decode", r, flush=True)
        if "prefill" in parts:
            for chunk in (512, 2048, 8192):
                for cached in (0, 8192, 32768, 65536):
                    r = prefill(model, chunk, cached, budget); out["results"].append(r)
                    print("prefill", r, flush=True)
    out["wall_s"] = time.time() - t0
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
