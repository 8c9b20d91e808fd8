#!/usr/bin/env python3
"""The Python client's data path against kvtierd, with its floor measured in
the same run: a numpy copy of the same bytes (kvtierd must copy each byte
once between the region and its tier, so a get or set cannot beat one memcpy).

    PYTHONPATH=build/python KVTIERD_BIN=build/daemon/kvtierd /usr/bin/python3 bench/python/bench_client.py [--json out.json]

Measures, each as the best of --repeat rounds (this is a shared VM):
  set (once the daemon's DRAM tier is full: the steady state; and its first
  fill apart) and get of 2 MiB blocks through
  kvtier.Client (GB/s), and the same bytes
  copied by numpy (GB/s): the ratio is the client's share of a memcpy;
  batch_exists on 64-key batches (batches/s and p50/p99 latency);
  the SGLang adapter's batch_get_v1 into a host pool (GB/s) against the
  client's own get: what the staging copy costs.
Bounded: a fixed number of blocks and rounds; the daemon stops with the run.
"""

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import types

import numpy as np
import torch

import kvtier
from kvtier.sglang import KvtierHiCacheStorage

MIB = 1 << 20


def start_daemon(folder, block_bytes, dram_bytes):
    sock = str(folder / "kvtierd.sock")
    config = folder / "daemon.toml"
    config.write_text(f'[daemon]\nsocket = "{sock}"\nmetrics = ""\nblock_bytes = "{block_bytes}"\n'
                      f'max_region_bytes = "{dram_bytes}"\n[dram]\nbytes = "{dram_bytes}"\n'
                      '[[tenant]]\nname = "bench"\ntoken = "bench-token"\n')
    log = open(folder / "kvtierd.log", "a+")
    proc = subprocess.Popen([os.environ["KVTIERD_BIN"], str(config)], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        log.seek(0)
        if "kvtierd: listening on" in log.read():
            return proc, sock
        if proc.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            sys.exit(f"kvtierd did not start:\n{log.read()}")
        time.sleep(0.01)


def best(fn, repeat):
    """The shortest of `repeat` calls fn(round)."""
    times = []
    for r in range(repeat):
        t = time.perf_counter()
        fn(r)
        times.append(time.perf_counter() - t)
    return min(times)


class HostPool:
    """SGLang's host pool (page_first), one 2 MiB page = 16 tokens of 32 layers x 8 heads x 128 x bf16 x K,V."""

    def __init__(self, pages, page_size=16):
        self.page_size = page_size
        self.kv_buffer = torch.zeros(2, pages * page_size, 32, 8, 128, dtype=torch.bfloat16)

    def get_data_page(self, index, flat=True):
        return self.kv_buffer[:, index:index + self.page_size].flatten()

    def get_dummy_flat_data_page(self):
        return torch.zeros_like(self.get_data_page(0))

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, index:index + self.page_size] = data_page.reshape(
            self.kv_buffer[:, index:index + self.page_size].shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--blocks", type=int, default=128, help="2 MiB blocks per batch round (default 256 MiB)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--exists-batches", type=int, default=2000)
    ap.add_argument("--json")
    args = ap.parse_args()
    block, n = 2 * MIB, args.blocks
    out = {"block_bytes": block, "blocks": n, "repeat": args.repeat}
    with tempfile.TemporaryDirectory(prefix="kvtierd-bench-") as tmp:
        # Every round of sets stores new blocks (a block the daemon holds is not copied
        # again); once the tier is full, each set evicts the oldest.
        tier_rounds = 4
        proc, sock = start_daemon(pathlib.Path(tmp), block, tier_rounds * n * block)
        try:
            c = kvtier.Client(sock, tenant="bench", token="bench-token")
            c.map_region(2 * n * block)
            blocks = c.numpy(np.uint8, blocks=True)
            blocks[:n] = np.random.default_rng(1).integers(0, 256, (n, block), dtype=np.uint8)
            blocks[n:2 * n] = 0  # touched: no page faults inside the timed copies
            names = [f"b{i}" for i in range(n)]
            src, dst = list(blocks[:n]), list(blocks[n:2 * n])

            # The tier's first fill (its pages written for the first time) is
            # measured apart; once it is full, sets evict: the steady state, below.
            fill = [n * block / best(lambda r: c.batch_set([f"fill{w}/{x}" for x in names], src), 1) / 1e9
                    for w in range(tier_rounds)]
            out["set_first_touch_gbps"] = min(fill)
            out["numpy_copy_gbps"] = n * block / best(lambda r: np.copyto(blocks[n:2 * n], blocks[:n]), args.repeat) / 1e9
            out["set_gbps"] = n * block / best(lambda r: c.batch_set([f"r{r}/{x}" for x in names], src),
                                               args.repeat) / 1e9
            c.batch_set(names, src)
            blocks[n:2 * n] = 0
            out["get_gbps"] = n * block / best(lambda r: c.batch_get(names, dst), args.repeat) / 1e9
            assert np.array_equal(blocks[n:2 * n], blocks[:n]), "a block came back wrong"
            out["set_vs_memcpy"] = out["set_gbps"] / out["numpy_copy_gbps"]
            out["get_vs_memcpy"] = out["get_gbps"] / out["numpy_copy_gbps"]

            batch = names[:64]
            lat = []
            for _ in range(args.exists_batches):
                t = time.perf_counter()
                hits = c.batch_exists(batch)
                lat.append(time.perf_counter() - t)
            assert hits == len(batch)
            lat.sort()
            out["exists64_per_s"] = len(lat) / sum(lat)
            out["exists64_p50_us"] = lat[len(lat) // 2] * 1e6
            out["exists64_p99_us"] = lat[int(len(lat) * 0.99)] * 1e6

            pool = HostPool(pages=n)
            cfg = types.SimpleNamespace(tp_rank=0, tp_size=1, is_mla_model=False, model_name="bench",
                                        extra_config={"region_pages": 64})
            pages = min(n, 128)
            backend = KvtierHiCacheStorage(cfg, client=kvtier.Client(sock, tenant="bench", token="bench-token"))
            backend.register_mem_pool_host(pool)
            pool.kv_buffer.view(torch.int16).random_(generator=torch.Generator().manual_seed(2))
            keys = [f"page{i}" for i in range(pages)]
            idx = torch.arange(0, pages * 16)
            out["sglang_set_v1_gbps"] = pages * block / best(
                lambda r: backend.batch_set_v1([f"r{r}/{k}" for k in keys], idx), args.repeat) / 1e9
            backend.batch_set_v1(keys, idx)
            want = pool.kv_buffer[:, :pages * 16].clone()
            pool.kv_buffer.zero_()
            out["sglang_get_v1_gbps"] = pages * block / best(lambda r: backend.batch_get_v1(keys, idx), args.repeat) / 1e9
            assert backend.batch_get_v1(keys, idx) == [True] * pages, "a page was not found"
            assert torch.equal(pool.kv_buffer[:, :pages * 16].view(torch.int16), want.view(torch.int16)), "a page came back wrong"
            out["sglang_get_v1_vs_client_get"] = out["sglang_get_v1_gbps"] / out["get_gbps"]
        finally:
            proc.send_signal(signal.SIGTERM)
            out["kvtierd_exit"] = proc.wait(timeout=60)

    print(f"kvtier.Client against kvtierd, {n} blocks of 2 MiB, best of {args.repeat}")
    print(f"  numpy copy (floor)     {out['numpy_copy_gbps']:7.2f} GB/s")
    print(f"  batch_set              {out['set_gbps']:7.2f} GB/s  ({out['set_vs_memcpy']:.2f}x the copy; tier full)")
    print(f"  batch_set, first fill  {out['set_first_touch_gbps']:7.2f} GB/s  (the daemon's tier written the first time)")
    print(f"  batch_get              {out['get_gbps']:7.2f} GB/s  ({out['get_vs_memcpy']:.2f}x the copy)")
    print(f"  batch_exists, 64 keys  {out['exists64_per_s']:7.0f} /s    p50 {out['exists64_p50_us']:.0f} us, "
          f"p99 {out['exists64_p99_us']:.0f} us")
    print(f"  SGLang batch_set_v1    {out['sglang_set_v1_gbps']:7.2f} GB/s")
    print(f"  SGLang batch_get_v1    {out['sglang_get_v1_gbps']:7.2f} GB/s  "
          f"({out['sglang_get_v1_vs_client_get']:.2f}x the client's get: the staging copy)")
    print(json.dumps(out))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if out["kvtierd_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
