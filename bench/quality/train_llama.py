#!/usr/bin/env python3
"""Trains a small byte-level Llama on the quality corpus and writes a Hugging Face
checkpoint that kvtier loads (real/checkpoint.hpp), for measuring compression
quality on a trained model (docs/compression.md, "Quality on a trained model").

    python3 bench/quality/train_llama.py --train build/quality/train.txt \
        --heldout build/quality/heldout.txt --out build/quality/model --seconds 240

Needs PyTorch and a CUDA GPU (a few minutes on one H200). The model reads bytes
(vocab 256), so no tokenizer is involved and losses are in nats per byte.
A share of the training rows carry a pass key (the same texts as
compression/model_quality.hpp's passkey_intro, passkey_needle and
passkey_question), so the model learns to retrieve one from far back: that is
what the pass-key test of the eviction policies needs.

Writes OUT/config.json, OUT/model-0000K-of-0000N.safetensors shards (each under
15 MB) with model.safetensors.index.json, and OUT/train.json (loss curve, held-out
loss, pass-key accuracy). When transformers is importable the checkpoint is read
back with LlamaForCausalLM and its logits compared with this script's model: the
names, shapes and RoPE convention are then Hugging Face's, not only ours.
"""
import argparse
import json
import math
import os
import random
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PASSKEY_INTRO = ("There is an important piece of information hidden in this text. "
                 "Find it and remember it: you will be asked for it.\n")
PASSKEY_QUESTION = "\nWhat is the pass key? The pass key is "


def needle(key):
    return f"\nThe pass key is {key}. Remember it. {key} is the pass key.\n"


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        d, hd = a.hidden, a.head_dim
        self.attn_norm = nn.Parameter(torch.ones(d))
        self.q = nn.Linear(d, a.heads * hd, bias=False)
        self.k = nn.Linear(d, a.kv_heads * hd, bias=False)
        self.v = nn.Linear(d, a.kv_heads * hd, bias=False)
        self.o = nn.Linear(a.heads * hd, d, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(d))
        self.gate = nn.Linear(d, a.intermediate, bias=False)
        self.up = nn.Linear(d, a.intermediate, bias=False)
        self.down = nn.Linear(a.intermediate, d, bias=False)
        self.heads, self.kv_heads, self.head_dim, self.eps = a.heads, a.kv_heads, hd, a.eps


def rms_norm(x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w.to(x.dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.embed = nn.Embedding(256, a.hidden)
        self.blocks = nn.ModuleList(Block(a) for _ in range(a.layers))
        self.norm = nn.Parameter(torch.ones(a.hidden))
        self.lm_head = nn.Linear(a.hidden, 256, bias=False)
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, a.head_dim, 2, dtype=torch.float64) / a.head_dim))
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * a.layers) if name.endswith(("o.weight", "down.weight")) else 0.02
                nn.init.normal_(p, std=std)

    def forward(self, ids):
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device, dtype=torch.float32)
        ang = torch.outer(pos, self.inv_freq)
        cos = torch.cat((ang.cos(), ang.cos()), -1)[None, None]
        sin = torch.cat((ang.sin(), ang.sin()), -1)[None, None]
        h = self.embed(ids)
        for blk in self.blocks:
            x = rms_norm(h, blk.attn_norm, blk.eps)
            q = blk.q(x).view(b, t, blk.heads, blk.head_dim).transpose(1, 2)
            k = blk.k(x).view(b, t, blk.kv_heads, blk.head_dim).transpose(1, 2)
            v = blk.v(x).view(b, t, blk.kv_heads, blk.head_dim).transpose(1, 2)
            q = (q * cos + rotate_half(q) * sin).to(v.dtype)
            k = (k * cos + rotate_half(k) * sin).to(v.dtype)
            group = blk.heads // blk.kv_heads
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            h = h + blk.o(att.transpose(1, 2).reshape(b, t, -1))
            x = rms_norm(h, blk.mlp_norm, blk.eps)
            h = h + blk.down(F.silu(blk.gate(x)) * blk.up(x))
        return self.lm_head(rms_norm(h, self.norm, self.a.eps))


def passkey_row(text, length, rng):
    """A training row of `length` bytes: intro, filler with a needle at a random
    depth, the question and the answer."""
    key = f"{rng.randrange(100000):05d}"
    head, tail = PASSKEY_INTRO.encode(), (PASSKEY_QUESTION + key + ".\n").encode()
    nd = needle(key).encode()
    filler = length - len(head) - len(tail) - len(nd)
    start = rng.randrange(len(text) - filler - 1)
    body = text[start:start + filler]
    depth = rng.randrange(filler + 1)
    row = head + body[:depth] + nd + body[depth:] + tail
    assert len(row) == length
    return row


def batches(text, a, rng, device):
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).to(device)
    n = len(text)
    while True:
        rows = a.batch
        keyed = sum(rng.random() < a.passkey_share for _ in range(rows))
        starts = torch.randint(0, n - a.seq - 1, (rows - keyed,), device=device)
        idx = starts[:, None] + torch.arange(a.seq + 1, device=device)[None]
        plain = data[idx].long()
        if keyed:
            pk = torch.tensor([list(passkey_row(text, a.seq + 1, rng)) for _ in range(keyed)], device=device)
            plain = torch.cat((plain, pk.long()), 0)
        yield plain[:, :-1], plain[:, 1:]


@torch.no_grad()
def heldout_loss(model, text, a, device, windows=64):
    rng = random.Random(7)
    total, tail_total = 0.0, 0.0
    for _ in range(windows):
        s = rng.randrange(len(text) - a.seq - 1)
        ids = torch.tensor(list(text[s:s + a.seq + 1]), device=device)[None]
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(ids[:, :-1]).float()
        nll = F.cross_entropy(logits[0], ids[0, 1:], reduction="none")
        total += nll.mean().item()
        tail_total += nll[a.seq // 2:].mean().item()
    return total / windows, tail_total / windows


@torch.no_grad()
def passkey_accuracy(model, text, a, device, prompts=64, length=1536):
    rng = random.Random(11)
    right = 0
    for _ in range(prompts):
        row = passkey_row(text, length + 7, rng)  # the answer's 5 digits, '.', '\n' at the end
        prompt, key = row[:length], row[length:length + 5]
        ids = torch.tensor(list(prompt), device=device)[None]
        out = []
        for _ in range(5):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                nxt = model(ids)[0, -1].float().argmax().item()
            out.append(nxt)
            ids = torch.cat((ids, torch.tensor([[nxt]], device=device)), 1)
        right += bytes(out) == key
    return right / prompts


def hf_tensors(model, a):
    t = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm,
         "lm_head.weight": model.lm_head.weight}
    for i, blk in enumerate(model.blocks):
        p = f"model.layers.{i}."
        t.update({p + "input_layernorm.weight": blk.attn_norm, p + "self_attn.q_proj.weight": blk.q.weight,
                  p + "self_attn.k_proj.weight": blk.k.weight, p + "self_attn.v_proj.weight": blk.v.weight,
                  p + "self_attn.o_proj.weight": blk.o.weight, p + "post_attention_layernorm.weight": blk.mlp_norm,
                  p + "mlp.gate_proj.weight": blk.gate.weight, p + "mlp.up_proj.weight": blk.up.weight,
                  p + "mlp.down_proj.weight": blk.down.weight})
    return {k: v.detach().to(torch.bfloat16).cpu().contiguous() for k, v in t.items()}


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        raw = t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    header["__metadata__"] = {"format": "pt"}
    js = json.dumps(header, separators=(",", ":")).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for raw in blobs:
            f.write(raw)


def save_checkpoint(model, a, out, shard_bytes=15_000_000):
    os.makedirs(out, exist_ok=True)
    tensors = hf_tensors(model, a)
    shards, cur, size = [], {}, 0
    for name, t in tensors.items():
        n = t.numel() * 2
        if cur and size + n > shard_bytes:
            shards.append(cur)
            cur, size = {}, 0
        cur[name] = t
        size += n
    shards.append(cur)
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(out, fname), shard)
        weight_map.update({name: fname for name in shard})
    total = sum(t.numel() * 2 for t in tensors.values())
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 256,
              "hidden_size": a.hidden, "intermediate_size": a.intermediate, "num_hidden_layers": a.layers,
              "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "head_dim": a.head_dim,
              "rms_norm_eps": a.eps, "rope_theta": a.rope_theta, "max_position_embeddings": a.seq,
              "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu",
              "attention_bias": False, "mlp_bias": False, "bos_token_id": 0, "eos_token_id": 0}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


@torch.no_grad()
def check_with_transformers(model, out, text, device):
    try:
        from transformers import LlamaForCausalLM
    except Exception as e:  # noqa: BLE001 - report any import failure, the checkpoint is still written
        return {"transformers": f"not checked ({type(e).__name__})"}
    hf = LlamaForCausalLM.from_pretrained(out, torch_dtype=torch.float32).to(device).eval()
    ids = torch.tensor(list(text[:512]), device=device)[None]
    ours = model.float()(ids).float()
    theirs = hf(ids).logits.float()
    return {"transformers_max_logit_diff": (ours - theirs).abs().max().item(),
            "transformers_argmax_agree": (ours.argmax(-1) == theirs.argmax(-1)).float().mean().item()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train", required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--seconds", type=float, default=240)
    p.add_argument("--hidden", type=int, default=384)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=1024)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=48)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--passkey-share", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    a.head_dim = a.hidden // a.heads
    a.eps, a.rope_theta = 1e-5, 10000.0
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = True
    train = open(a.train, "rb").read()
    held = open(a.heldout, "rb").read()
    model = Model(a).to(device)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
    print(f"params {params / 1e6:.2f} M, {a.layers} layers x {a.hidden}, heads {a.heads}/{a.kv_heads}, "
          f"seq {a.seq}, batch {a.batch}, {a.seconds:.0f} s", flush=True)
    curve, step, tokens = [], 0, 0
    start = time.time()
    for x, y in batches(train, a, rng, device):
        frac = (time.time() - start) / a.seconds
        if frac >= 1:
            break
        lr = a.lr * (frac / 0.03 if frac < 0.03 else 0.1 + 0.45 * (1 + math.cos(math.pi * (frac - 0.03) / 0.97)))
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).float().view(-1, 256), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        tokens += x.numel()
        if step % 50 == 0:
            curve.append({"step": step, "seconds": round(time.time() - start, 1), "loss": round(loss.item(), 4)})
            print(f"step {step} {time.time() - start:.0f} s loss {loss.item():.4f} lr {lr:.2e}", flush=True)
    seconds = time.time() - start
    model.eval()
    full, tail = heldout_loss(model, held, a, device)
    acc = passkey_accuracy(model, held, a, device)
    save_checkpoint(model, a, a.out)
    result = {"params": params, "steps": step, "tokens": tokens, "train_seconds": round(seconds, 1),
              "tokens_per_second": round(tokens / seconds), "heldout_nats_per_byte": round(full, 4),
              "heldout_second_half_nats_per_byte": round(tail, 4), "passkey_accuracy_1536": acc, "curve": curve,
              "geometry": {k: getattr(a, k) for k in ("hidden", "layers", "heads", "kv_heads", "head_dim",
                                                       "intermediate", "seq")}}
    result.update(check_with_transformers(model, a.out, held, device))
    with open(os.path.join(a.out, "train.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)


if __name__ == "__main__":
    main()
