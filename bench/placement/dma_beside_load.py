#!/usr/bin/env python3
"""What a kernel-free PCIe copy keeps of the link beside each kind of GPU work.

A demotion moves KV blocks device->host on a copy engine while the forward
runs. This bench runs the same copies (each direction, on their own stream,
GPU-timed by events) beside one background load at a time, in one sitting.
The copies' shape (--shape): `chunks`, contiguous 2 MiB pieces; `block2d`,
kvtier's dma_2d path, one cudaMemcpy2DAsync per block of 32 layer slices of
--row-kib KiB (64: 16-token blocks of Llama-3-8B) from a 48 GiB layer-major
pool; `block2d_staged`, each block gathered device-to-device first. --host-gib
spreads them over a larger pinned buffer. The loads (--loads picks some; each
is checked to outlast its copies, `loads_ended_before_copies` in the JSON):

  none         the baseline: nothing else on the GPU
  gemm         8192^3 bf16 matmuls: compute-bound, little HBM traffic
  hbm_copy     1 GiB device-to-device tensor copies: HBM-bandwidth-bound
  decode_gemv  batch-64 x [4096 x 14336] bf16: weight streaming, like decode
  small_d2h    the forward's own traffic: 64 small device->host copies per ms
  attention    decode attention over a long paged-size context (SDPA, memory-bound)
  opposite     the other direction's copies at the same time (promotions beside demotions)
  attention+opposite  both at once, on two streams (decode beside promotions)
  llama_decode   a whole Llama-3-8B-geometry decode step (32 layers, batch 16, 4k context
                 each, seeded random weights), replayed from a CUDA graph
  llama_prefill  the same model's 2,048-token prefill chunk, replayed from a CUDA graph

and prints each load's rate and its ratio to the baseline, and JSON
(--json-out FILE).  Needs PyTorch with CUDA.

  python3 bench/placement/dma_beside_load.py --json-out OUT.json
  python3 bench/placement/dma_beside_load.py --shape block2d --row-kib 256 --llama --loads llama_decode
"""
import argparse
import json
import statistics
import sys

import torch

CHUNK = 2 << 20  # one copy: a block's slice of one layer pair, as the mover issues it


def cudart():
    """The CUDA runtime for cudaMemcpy2DAsync, which PyTorch does not expose."""
    import ctypes
    import glob
    import os
    candidates = (glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libcudart.so*"))
                  + glob.glob("/usr/local/cuda/lib64/libcudart.so*"))
    for c in candidates + ["libcudart.so"]:
        try:
            lib = ctypes.CDLL(c)
            lib.cudaMemcpy2DAsync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                                              ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
            return lib
        except OSError:
            continue
    raise RuntimeError("no libcudart found for --shape block2d")


class BlockShape:
    """kvtier's layer-major HBM pool: a block is `rows` slices of `row` bytes, one per layer, `pitch` apart;
    a demotion moves each block as one 2D copy into a block-major DRAM slot (the mover's dma_2d path)."""

    def __init__(self, device_buf, rows, row, pool_blocks):
        self.buf, self.rows, self.row, self.pitch, self.pool_blocks = device_buf, rows, row, row * pool_blocks, pool_blocks
        self.lib = cudart()


def copies(direction, device_buf, host_buf, count, stride, stream, block=None):
    if block is not None:
        return block_copies(direction, block, host_buf, count, stream)
    return chunk_copies(direction, device_buf, host_buf, count, stride, stream)


def block_copies(direction, block, host_buf, count, stream):
    """`count` 2D block copies (rows x row bytes, HBM rows `pitch` apart) on `stream`. With a staging
    buffer (block2d_staged, device->host only): each block gathered device-to-device into a block-major
    staging area by the copy engine, then every `stage_blocks` blocks leave in one contiguous copy."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    kind = 2 if direction == "d2h" else 1  # cudaMemcpyDeviceToHost / HostToDevice
    base, host = block.buf.data_ptr(), host_buf.data_ptr()
    block_bytes = block.rows * block.row
    staged = getattr(block, "stage", None) is not None and kind == 2
    with torch.cuda.stream(stream):
        start.record()
        for i in range(count):
            dev = base + (i * 7 % block.pool_blocks) * block.row  # scattered slots, as eviction leaves them
            h = host + i * block_bytes
            if staged:
                k = i % block.stage_blocks
                stage = block.stage.data_ptr() + k * block_bytes
                e = block.lib.cudaMemcpy2DAsync(stage, block.row, dev, block.pitch, block.row, block.rows, 3,
                                                stream.cuda_stream)  # cudaMemcpyDeviceToDevice
                if e:
                    raise RuntimeError(f"cudaMemcpy2DAsync (device to device): error {e}")
                if k == block.stage_blocks - 1 or i == count - 1:
                    first = i - k
                    host_buf[first * block_bytes:(i + 1) * block_bytes].copy_(
                        block.stage[:(k + 1) * block_bytes], non_blocking=True)
                continue
            if kind == 2:
                e = block.lib.cudaMemcpy2DAsync(h, block.row, dev, block.pitch, block.row, block.rows, kind, stream.cuda_stream)
            else:
                e = block.lib.cudaMemcpy2DAsync(dev, block.pitch, h, block.row, block.row, block.rows, kind, stream.cuda_stream)
            if e:
                raise RuntimeError(f"cudaMemcpy2DAsync: error {e}")
        end.record()
    return start, end


def chunk_copies(direction, device_buf, host_buf, count, stride, stream):
    """Issues `count` strided CHUNK copies on `stream`, spread evenly over the host buffer;
    returns its (start, end) events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    host_stride = host_buf.numel() // CHUNK // count
    with torch.cuda.stream(stream):
        start.record()
        for i in range(count):
            d = device_buf[i * stride * CHUNK:(i * stride + 1) * CHUNK]
            h = host_buf[i * host_stride * CHUNK:(i * host_stride + 1) * CHUNK]
            if direction == "d2h":
                h.copy_(d, non_blocking=True)
            else:
                d.copy_(h, non_blocking=True)
        end.record()
    return start, end


class LlamaShape:
    """Llama-3-8B's geometry: what one forward streams and computes, not a trained model."""
    layers, hidden, heads, kv_heads, head_dim, ffn, vocab = 32, 4096, 32, 8, 128, 14336, 128256


def rms_norm(x, weight):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5).to(x.dtype) * weight


def make_llama(dev):
    """Seeded random weights of the 8B geometry in bf16 (16 GB) and a step function factory."""
    g = LlamaShape
    torch.manual_seed(1)
    w = []
    for _ in range(g.layers):
        w.append({
            "qkv": torch.randn(g.hidden, (g.heads + 2 * g.kv_heads) * g.head_dim, dtype=torch.bfloat16, device=dev) * 0.02,
            "o": torch.randn(g.heads * g.head_dim, g.hidden, dtype=torch.bfloat16, device=dev) * 0.02,
            "gate_up": torch.randn(g.hidden, 2 * g.ffn, dtype=torch.bfloat16, device=dev) * 0.02,
            "down": torch.randn(g.ffn, g.hidden, dtype=torch.bfloat16, device=dev) * 0.02,
            "n1": torch.ones(g.hidden, dtype=torch.bfloat16, device=dev),
            "n2": torch.ones(g.hidden, dtype=torch.bfloat16, device=dev),
        })
    head = torch.randn(g.hidden, g.vocab, dtype=torch.bfloat16, device=dev) * 0.02
    return w, head


def llama_step(w, head, x, kv, causal):
    """One forward over x [batch, tokens, hidden]; kv: per layer (k, v) [batch, kv_heads, ctx, head_dim] or None."""
    g = LlamaShape
    b, t, _ = x.shape
    for i, lw in enumerate(w):
        h = rms_norm(x, lw["n1"])
        qkv = h @ lw["qkv"]
        q, k, v = qkv.split([g.heads * g.head_dim, g.kv_heads * g.head_dim, g.kv_heads * g.head_dim], dim=-1)
        q = q.view(b, t, g.heads, g.head_dim).transpose(1, 2)
        if kv is None:
            k = k.view(b, t, g.kv_heads, g.head_dim).transpose(1, 2)
            v = v.view(b, t, g.kv_heads, g.head_dim).transpose(1, 2)
        else:
            k, v = kv[i]  # the context's keys and values (the step's own row is left out: same bytes read)
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        x = x + a.transpose(1, 2).reshape(b, t, -1) @ lw["o"]
        h = rms_norm(x, lw["n2"])
        gu = h @ lw["gate_up"]
        gate, up = gu.chunk(2, dim=-1)
        x = x + (torch.nn.functional.silu(gate) * up) @ lw["down"]
    return rms_norm(x[:, -1], w[-1]["n2"]) @ head


def capture(fn):
    """A CUDA graph of fn(): one launch per replay, so a load queues far ahead of its copies."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def add_llama_loads(tensors, dev):
    g = LlamaShape
    w, head = make_llama(dev)
    batch, ctx = 16, 4096
    kv = [(torch.randn(batch, g.kv_heads, ctx, g.head_dim, dtype=torch.bfloat16, device=dev),
           torch.randn(batch, g.kv_heads, ctx, g.head_dim, dtype=torch.bfloat16, device=dev)) for _ in range(g.layers)]
    x_decode = torch.randn(batch, 1, g.hidden, dtype=torch.bfloat16, device=dev)
    x_prefill = torch.randn(1, 2048, g.hidden, dtype=torch.bfloat16, device=dev)
    tensors["llama_decode"] = capture(lambda: llama_step(w, head, x_decode, kv, causal=False))
    tensors["llama_prefill"] = capture(lambda: llama_step(w, head, x_prefill, None, causal=True))


def background(kind, stream, iterations, tensors):
    """Queues `iterations` units of load `kind` on `stream`."""
    with torch.cuda.stream(stream):
        for _ in range(iterations):
            if kind == "gemm":
                torch.mm(tensors["a"], tensors["b"], out=tensors["c"])
            elif kind == "hbm_copy":
                tensors["y"].copy_(tensors["x"])
            elif kind == "decode_gemv":
                torch.mm(tensors["act"], tensors["w"], out=tensors["out"])
            elif kind == "attention":
                torch.nn.functional.scaled_dot_product_attention(
                    tensors["q"], tensors["k"], tensors["v"])
            elif kind == "opposite":
                n = tensors["opposite_chunks"]
                for i in range(n):
                    src = tensors["opposite_host"][i * CHUNK:(i + 1) * CHUNK]
                    dst = tensors["opposite_dev"][i * CHUNK:(i + 1) * CHUNK]
                    if tensors["opposite_direction"] == "h2d":
                        dst.copy_(src, non_blocking=True)
                    else:
                        src.copy_(dst, non_blocking=True)
            elif kind.startswith("llama_"):
                tensors[kind].replay()
            elif kind == "small_d2h":
                for _ in range(64):
                    tensors["small_host"].copy_(tensors["small_dev"], non_blocking=True)
                torch.cuda._sleep(1_000_000)  # ~0.5 ms of idle SMs between bursts


def load_units_for(kind, stream, tensors, seconds):
    """How many units of `kind` keep the GPU busy for about `seconds`."""
    if kind == "none":
        return 0
    background(kind, stream, 3, tensors)
    torch.cuda.synchronize()
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        s.record()
    background(kind, stream, 10, tensors)
    with torch.cuda.stream(stream):
        e.record()
    torch.cuda.synchronize()
    per_unit = s.elapsed_time(e) / 1000 / 10
    return max(1, int(seconds / per_unit) + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=768, help="2 MiB copies per measurement (768 = 1.5 GiB)")
    ap.add_argument("--stride", type=int, default=2, help="device chunks between copies (2: strided, like layers)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--host-gib", type=float, default=0,
                    help="pinned host buffer the copies spread over (default: just their bytes); a run's DRAM pool is 16 GiB")
    ap.add_argument("--shape", choices=["chunks", "block2d", "block2d_staged"], default="chunks",
                    help="chunks: 2 MiB contiguous copies; block2d: kvtier's per-block 2D copies (32 rows of 64 KiB "
                         "from a 48 GiB layer-major pool)")
    ap.add_argument("--row-kib", type=int, default=64,
                    help="block2d: bytes of one layer's slice of a block, KiB (64: 16-token blocks of Llama-3-8B)")
    ap.add_argument("--loads", help="comma-separated subset of the loads to run (default: all)")
    ap.add_argument("--llama", action="store_true", help="also the whole-model loads (16 GB of weights, ~24 GB of KV)")
    ap.add_argument("--json-out")
    args = ap.parse_args()

    dev = torch.device("cuda")
    block = None
    if args.shape.startswith("block2d"):
        rows, row = 32, args.row_kib << 10  # Llama-3-8B: 64 KiB of K and V per layer for 16-token blocks
        pool_blocks = (48 << 30) // (rows * row)
        device_buf = torch.empty(rows * row * pool_blocks, dtype=torch.uint8, device=dev)
        block = BlockShape(device_buf, rows, row, pool_blocks)
        args.copies = max(1, args.copies * CHUNK // (rows * row))  # the same bytes whatever the row
        if args.shape == "block2d_staged":
            block.stage_blocks = 64  # a demotion batch
            block.stage = torch.empty(block.stage_blocks * rows * row, dtype=torch.uint8, device=dev)
    else:
        device_buf = torch.empty(args.copies * args.stride * CHUNK, dtype=torch.uint8, device=dev)
    copy_bytes = block.rows * block.row if block is not None else CHUNK
    host_bytes = max(args.copies * copy_bytes, int(args.host_gib * (1 << 30)) // CHUNK * CHUNK)
    host_buf = torch.empty(host_bytes, dtype=torch.uint8, pin_memory=True)
    device_buf[:1 << 30].random_(0, 255)
    tensors = {
        "a": torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev),
        "b": torch.randn(8192, 8192, dtype=torch.bfloat16, device=dev),
        "c": torch.empty(8192, 8192, dtype=torch.bfloat16, device=dev),
        "x": torch.empty(1 << 30, dtype=torch.uint8, device=dev),
        "y": torch.empty(1 << 30, dtype=torch.uint8, device=dev),
        "act": torch.randn(64, 4096, dtype=torch.bfloat16, device=dev),
        "w": torch.randn(4096, 14336, dtype=torch.bfloat16, device=dev),
        "out": torch.empty(64, 14336, dtype=torch.bfloat16, device=dev),
        "q": torch.randn(64, 32, 1, 128, dtype=torch.bfloat16, device=dev),
        "k": torch.randn(64, 32, 8192, 128, dtype=torch.bfloat16, device=dev),
        "v": torch.randn(64, 32, 8192, 128, dtype=torch.bfloat16, device=dev),
        "opposite_chunks": 64,
        "opposite_host": torch.empty(64 * CHUNK, dtype=torch.uint8, pin_memory=True),
        "opposite_dev": torch.empty(64 * CHUNK, dtype=torch.uint8, device=dev),
        "small_dev": torch.empty(64 << 10, dtype=torch.uint8, device=dev),
        "small_host": torch.empty(64 << 10, dtype=torch.uint8, pin_memory=True),
    }
    copy_stream = torch.cuda.Stream()
    load_stream = torch.cuda.Stream()
    nbytes = args.copies * copy_bytes
    loads = ["none", "gemm", "hbm_copy", "decode_gemv", "attention", "small_d2h", "opposite", "attention+opposite"]
    second_load_stream = torch.cuda.Stream()
    if args.llama:
        add_llama_loads(tensors, dev)
        loads += ["llama_decode", "llama_prefill"]
    if args.loads:
        loads = [k for k in loads if k == "none" or k in args.loads.split(",")]
    results = {}
    # Warm both directions once.
    for direction in ("d2h", "h2d"):
        copies(direction, device_buf, host_buf, args.copies, args.stride, copy_stream, block)
    torch.cuda.synchronize()
    short_loads = []  # measurements whose load ended before the copies did
    for direction in ("d2h", "h2d"):
        tensors["opposite_direction"] = "h2d" if direction == "d2h" else "d2h"
        units_of = {kind: load_units_for(kind, load_stream, tensors, seconds=nbytes / 40e9 * 1.5 + 0.01)
                    for kind in loads if "+" not in kind}
        for kind in loads:
            rates = []
            for _ in range(args.repeats):
                # Load first, so the copies start beside it and finish before it does.
                torch.cuda.synchronize()
                for i, part in enumerate(kind.split("+")):
                    background(part, second_load_stream if i else load_stream, units_of[part], tensors)
                start, end = copies(direction, device_buf, host_buf, args.copies, args.stride, copy_stream, block)
                load_end = torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(load_stream):
                    load_end.record()
                torch.cuda.synchronize()
                rates.append(nbytes / (start.elapsed_time(end) / 1000) / 1e9)
                if kind != "none" and end.elapsed_time(load_end) < 0:
                    short_loads.append(f"{direction} {kind}")
            results.setdefault(direction, {})[kind] = {
                "gbps_median": statistics.median(rates),
                "gbps_all": rates,
            }
    print(f"{'load':<20}" + "".join(f"{d + ' GB/s':>12}{'x none':>9}" for d in ("d2h", "h2d")))
    for kind in loads:
        row = f"{kind:<20}"
        for direction in ("d2h", "h2d"):
            r = results[direction][kind]["gbps_median"]
            base = results[direction]["none"]["gbps_median"]
            results[direction][kind]["ratio_to_none"] = r / base
            row += f"{r:>12.2f}{r / base:>9.3f}"
        print(row)
    out = {
        "bench": "dma_beside_load",
        "device": torch.cuda.get_device_name(0),
        "copies": args.copies,
        "chunk_bytes": CHUNK,
        "stride_chunks": args.stride,
        "shape": args.shape,
        "row_kib": args.row_kib,
        "host_buffer_bytes": host_bytes,
        "repeats": args.repeats,
        "results": results,
        "loads_ended_before_copies": short_loads,
    }
    print(json.dumps(out, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
