#!/usr/bin/env python3
"""PyTorch baseline for bench/model: a Llama-3-8B-shaped decoder with random
bf16 weights, dense KV caches, SDPA attention; decode steps captured in a CUDA
graph (as production engines run decode), prefill chunks eager with a
lower-right causal mask over the cached prefix (torch.nn.attention.bias's
causal_lower_right, which SDPA runs on its flash kernel; a dense boolean mask
where that is missing). Same shapes as bench/model.

    python3 model_torch_baseline.py OUT.json [--quick] [--prefill]

--prefill: the prefill steps only (no decode steps).

Writes {"decode b8 c4096": ms, ...}, one entry per line (bench/model reads it).
"""
import json
import sys

import torch
import torch.nn.functional as F

L, H, QH, KVH, D, FF, V = 32, 4096, 32, 8, 128, 14336, 128256
dev, dt = "cuda", torch.bfloat16
quick = "--quick" in sys.argv
prefill_only = "--prefill" in sys.argv


def rms(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * w


def rope(x, cos, sin):  # x [..., D], Hugging Face pairing
    a, b = x[..., : D // 2], x[..., D // 2 :]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


torch.manual_seed(0)
g = torch.Generator(device=dev).manual_seed(0)


def rand(*shape, scale):
    return (torch.rand(*shape, device=dev, dtype=dt, generator=g) * 2 - 1) * scale


layers = []
for _ in range(L):
    layers.append(
        dict(
            n1=torch.ones(H, device=dev, dtype=dt),
            wqkv=rand(H, (QH + 2 * KVH) * D, scale=H**-0.5),
            wo=rand(QH * D, H, scale=(QH * D) ** -0.5),
            n2=torch.ones(H, device=dev, dtype=dt),
            wgu=rand(H, 2 * FF, scale=H**-0.5),
            wd=rand(FF, H, scale=FF**-0.5),
        )
    )
emb = rand(V, H, scale=1.0)
head = rand(H, V, scale=H**-0.5)
normf = torch.ones(H, device=dev, dtype=dt)
inv_freq = 1.0 / (500000.0 ** (torch.arange(0, D, 2, device=dev).float() / D))

try:
    F.scaled_dot_product_attention(
        torch.zeros(1, 4, 1, 8, device=dev, dtype=dt), torch.zeros(1, 2, 3, 8, device=dev, dtype=dt),
        torch.zeros(1, 2, 3, 8, device=dev, dtype=dt), enable_gqa=True)
    gqa = True
except TypeError:
    gqa = False


def prefill_mask(n, total):
    """A chunk of n attends its cached prefix and causally within itself."""
    try:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(n, total)
        q = torch.zeros(1, QH, n, D, device=dev, dtype=dt)
        kv = torch.zeros(1, KVH, total, D, device=dev, dtype=dt)
        attend(q, kv, kv, mask)
        return mask, "causal_lower_right"
    except Exception:
        return torch.ones(n, total, device=dev, dtype=torch.bool).tril(diagonal=total - n), "dense bool"


def attend(q, k, v, mask=None):
    if gqa:
        try:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        except (TypeError, RuntimeError):
            if mask is None or isinstance(mask, torch.Tensor):
                raise  # a causal bias without GQA support falls through to repeated heads
    rep = QH // KVH
    return F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), attn_mask=mask)


def forward(tokens, pos, kc, vc, ctx_end, mask=None):
    """tokens [b, n] at positions pos..pos+n-1; caches [L][b, KVH, max, D]."""
    b, n = tokens.shape
    x = emb[tokens]
    positions = pos + torch.arange(n, device=dev)
    ang = positions.float()[:, None] * inv_freq[None, :]
    cos, sin = ang.cos().to(dt)[None, None], ang.sin().to(dt)[None, None]
    for i, w in enumerate(layers):
        h = rms(x, w["n1"])
        qkv = h @ w["wqkv"]
        q, k, v = qkv.split([QH * D, KVH * D, KVH * D], dim=-1)
        q = rope(q.view(b, n, QH, D).transpose(1, 2), cos, sin)
        k = rope(k.view(b, n, KVH, D).transpose(1, 2), cos, sin)
        v = v.view(b, n, KVH, D).transpose(1, 2)
        kc[i][:, :, pos : pos + n] = k
        vc[i][:, :, pos : pos + n] = v
        a = attend(q, kc[i][:, :, :ctx_end], vc[i][:, :, :ctx_end], mask)
        x = x + a.transpose(1, 2).reshape(b, n, QH * D) @ w["wo"]
        gu = rms(x, w["n2"]) @ w["wgu"]
        gate, up = gu.split([FF, FF], dim=-1)
        x = x + (F.silu(gate) * up) @ w["wd"]
    return rms(x[:, -1], normf) @ head


def timed(fn, reps):
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps


out = {}
batches = [] if prefill_only else [1, 8] if quick else [1, 8, 32, 128]
contexts = [1024, 4096] if quick else [1024, 4096, 8192, 16384, 32768]
budget = (64 if quick else 640) * 1024  # tokens of KV, as bench/model's pool
with torch.inference_mode():
    for b in batches:
        for c in contexts:
            if b * (c + 16) > budget:
                continue
            kc = [torch.zeros(b, KVH, c + 1, D, device=dev, dtype=dt) for _ in range(L)]
            vc = [torch.zeros(b, KVH, c + 1, D, device=dev, dtype=dt) for _ in range(L)]
            tok = torch.full((b, 1), 7, device=dev, dtype=torch.long)
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(2):
                    forward(tok, c, kc, vc, c + 1)
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                forward(tok, c, kc, vc, c + 1)
            out[f"decode b{b} c{c}"] = timed(graph.replay, 10)
            print(f"decode b{b} c{c}: {out[f'decode b{b} c{c}']:.3f} ms", flush=True)
            del kc, vc, graph
            torch.cuda.empty_cache()
    chunks = [512] if quick else [512, 2048, 8192]
    cached = [0, 8192] if quick else [0, 8192, 32768, 65536]
    for n in chunks:
        for k in cached:
            if k + n > budget:
                continue
            kc = [torch.zeros(1, KVH, k + n, D, device=dev, dtype=dt) for _ in range(L)]
            vc = [torch.zeros(1, KVH, k + n, D, device=dev, dtype=dt) for _ in range(L)]
            tok = torch.full((1, n), 11, device=dev, dtype=torch.long)
            mask, kind = prefill_mask(n, k + n)
            out[f"prefill n{n} after {k}"] = timed(lambda: forward(tok, k, kc, vc, k + n, mask), 3)
            print(f"prefill n{n} after {k}: {out[f'prefill n{n} after {k}']:.3f} ms ({kind} mask)", flush=True)
            del kc, vc
            torch.cuda.empty_cache()

with open(sys.argv[1], "w") as f:
    f.write("{\n" + ",\n".join(f'  "{k}": {v:.6f}' for k, v in out.items()) + "\n}\n")
