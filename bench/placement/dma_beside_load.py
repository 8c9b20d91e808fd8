#!/usr/bin/env python3
"""What a kernel-free PCIe copy keeps of the link beside each kind of GPU work.

A demotion moves KV blocks device->host as strided 2 MiB copies on a copy
engine while the forward runs. Alone they reach ~96% of the link; beside the
real forward ~81%. This bench separates the candidate causes by running the
same copies (each direction, on their own stream, GPU-timed by events) beside
one background load at a time, in one sitting:

  none         the baseline: nothing else on the GPU
  gemm         8192^3 bf16 matmuls: compute-bound, little HBM traffic
  hbm_copy     1 GiB device-to-device tensor copies: HBM-bandwidth-bound
  decode_gemv  batch-64 x [4096 x 14336] bf16: weight streaming, like decode
  small_d2h    the forward's own traffic: 64 small device->host copies per ms
  attention    decode attention over a long paged-size context (SDPA, memory-bound)
  opposite     the other direction's copies at the same time (promotions beside demotions)
  attention+opposite  both at once, on two streams (decode beside promotions)

and prints each load's rate and its ratio to the baseline, and JSON
(--json-out FILE).  Needs PyTorch with CUDA.

  python3 bench/placement/dma_beside_load.py --json-out OUT.json
"""
import argparse
import json
import statistics
import sys

import torch

CHUNK = 2 << 20  # one copy: a block's slice of one layer pair, as the mover issues it


def copies(direction, device_buf, host_buf, count, stride, stream):
    """Issues `count` strided CHUNK copies on `stream`; returns its (start, end) events."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record()
        for i in range(count):
            d = device_buf[i * stride * CHUNK:(i * stride + 1) * CHUNK]
            h = host_buf[i * CHUNK:(i + 1) * CHUNK]
            if direction == "d2h":
                h.copy_(d, non_blocking=True)
            else:
                d.copy_(h, non_blocking=True)
        end.record()
    return start, end


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
    ap.add_argument("--json-out")
    args = ap.parse_args()

    dev = torch.device("cuda")
    device_buf = torch.empty(args.copies * args.stride * CHUNK, dtype=torch.uint8, device=dev)
    host_buf = torch.empty(args.copies * CHUNK, dtype=torch.uint8, pin_memory=True)
    device_buf.random_(0, 255)
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
    nbytes = args.copies * CHUNK
    loads = ["none", "gemm", "hbm_copy", "decode_gemv", "attention", "small_d2h", "opposite", "attention+opposite"]
    second_load_stream = torch.cuda.Stream()
    results = {}
    # Warm both directions once.
    for direction in ("d2h", "h2d"):
        copies(direction, device_buf, host_buf, args.copies, args.stride, copy_stream)
    torch.cuda.synchronize()
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
                start, end = copies(direction, device_buf, host_buf, args.copies, args.stride, copy_stream)
                torch.cuda.synchronize()
                rates.append(nbytes / (start.elapsed_time(end) / 1000) / 1e9)
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
        "repeats": args.repeats,
        "results": results,
    }
    print(json.dumps(out, indent=2))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
