"""kvtier.Client against kvtierd in child processes: blocks checksummed after
the round trip across connections and processes, tenants kept apart, a wrong
token and a full quota refused with the daemon's words."""

import hashlib
import json
import os
import subprocess
import sys
import unittest

import numpy as np
import torch

import kvtier
from stores import Kvtierd, needs_kvtierd

BLOCK = 8192

# A client process: stores `count` blocks of its own, then reads every
# process's blocks back and prints their SHA-256 checksums.
CHILD = r"""
import hashlib, json, sys
import numpy as np
import kvtier
socket, me, processes, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
c = kvtier.Client(socket, tenant="engine", token="engine-token")
c.map_region(count * c.block_bytes)
blocks = c.numpy(np.uint8, blocks=True)
blocks[:] = np.random.default_rng(me).integers(0, 256, blocks.shape, dtype=np.uint8)
assert all(c.batch_set([f"p{me}/{i}" for i in range(count)], list(blocks)))
print("stored", flush=True)
sys.stdin.readline()  # every process has stored its blocks
sums = {}
for p in range(processes):
    names = [f"p{p}/{i}" for i in range(count)]
    assert c.batch_exists(names) == count
    assert all(c.batch_get(names, list(blocks)))
    sums.update({n: hashlib.sha256(b.tobytes()).hexdigest() for n, b in zip(names, blocks)})
print(json.dumps(sums), flush=True)
"""


def expected_sums(processes, count):
    sums = {}
    for p in range(processes):
        data = np.random.default_rng(p).integers(0, 256, (count, BLOCK), dtype=np.uint8)
        sums.update({f"p{p}/{i}": hashlib.sha256(data[i].tobytes()).hexdigest() for i in range(count)})
    return sums


@needs_kvtierd
class ClientOnKvtierd(unittest.TestCase):
    """kvtierd started per test; the C++ client process is built beside it."""

    def test_blocks_cross_connections_intact(self):
        with Kvtierd(BLOCK) as daemon:
            writer, reader = daemon.connect(), daemon.connect()
            writer.map_region(8 * BLOCK)
            reader.map_region(8 * BLOCK)
            self.assertEqual(writer.block_bytes, BLOCK)
            src = writer.torch(torch.float32, blocks=True)
            src.copy_(torch.randn(src.shape, generator=torch.Generator().manual_seed(3)))
            names = [f"layer-block-{i}" for i in range(8)]
            self.assertEqual(writer.batch_set(names, list(src)), [True] * 8)
            dst = reader.numpy(np.float32, blocks=True)
            order = [5, 0, 7, 2, 1, 6, 3, 4]
            self.assertEqual(reader.batch_get(names, [dst[j] for j in order]), [True] * 8)
            for i, j in enumerate(order):
                self.assertEqual(hashlib.sha256(dst[j].tobytes()).hexdigest(),
                                 hashlib.sha256(src[i].numpy().tobytes()).hexdigest())
            self.assertEqual(reader.batch_exists(names + ["absent"] + names), 8)

    def test_several_client_processes(self):
        processes, count = 3, 6
        with Kvtierd(BLOCK) as daemon:
            env = dict(os.environ)
            children = [subprocess.Popen([sys.executable, "-c", CHILD, daemon.socket, str(p), str(processes),
                                          str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         env=env) for p in range(processes)]
            for child in children:
                self.assertEqual(child.stdout.readline().strip(), "stored")
            results = [child.communicate("go\n", timeout=60)[0] for child in children]
            self.assertEqual([c.returncode for c in children], [0] * processes)
        want = expected_sums(processes, count)
        for out in results:
            self.assertEqual(json.loads(out), want)

    def test_blocks_cross_between_cpp_and_python(self):
        # cross_client.cpp keys its blocks {lo, hi} and fills byte j of block i
        # with (31 i + j) mod 256; it checks blocks {lo 2000+i, hi 7} for (17 i + 3 j) mod 256.
        cross = os.environ["KVTIER_CROSS_CLIENT"]
        key = lambda lo, hi: lo.to_bytes(8, "little") + hi.to_bytes(8, "little")  # noqa: E731
        with Kvtierd(BLOCK) as daemon:
            run = lambda mode: subprocess.run([cross, daemon.socket, "engine", "engine-token", mode],  # noqa: E731
                                              capture_output=True, text=True)
            self.assertEqual(run("check").returncode, 1)  # nothing stored yet: the check can fail
            stored = run("store")
            self.assertEqual((stored.returncode, stored.stdout), (0, "cross_client store: 4 of 4 blocks\n"))
            c = daemon.connect()
            c.map_region(8 * BLOCK)
            blocks = c.numpy(np.uint8, blocks=True)
            self.assertEqual(c.batch_get([key(1000 + i, 42) for i in range(4)], list(blocks[:4])), [True] * 4)
            j = np.arange(BLOCK)
            for i in range(4):
                self.assertTrue(np.array_equal(blocks[i], ((31 * i + j) % 256).astype(np.uint8)), i)
                blocks[4 + i] = ((17 * i + 3 * j) % 256).astype(np.uint8)
            self.assertEqual(c.batch_set([key(2000 + i, 7) for i in range(4)], list(blocks[4:])), [True] * 4)
            checked = run("check")
            self.assertEqual((checked.returncode, checked.stdout), (0, "cross_client check: 4 of 4 blocks\n"))

    def test_tenants_are_kept_apart(self):
        with Kvtierd(BLOCK) as daemon:
            engine, other = daemon.connect("engine"), daemon.connect("other")
            for c in (engine, other):
                c.map_region(BLOCK)
            engine.numpy()[:] = 1
            other.numpy()[:] = 2
            engine.batch_set(["shared-name"], [0])
            self.assertEqual(other.batch_exists(["shared-name"]), 0)
            self.assertEqual(other.batch_get(["shared-name"], [0]), [False])
            self.assertEqual(int(other.numpy()[0]), 2)
            other.batch_set(["shared-name"], [0])
            engine.batch_get(["shared-name"], [0])
            self.assertEqual(int(engine.numpy().max()), 1)

    def test_wrong_token_is_refused(self):
        with Kvtierd(BLOCK) as daemon:
            with self.assertRaises(kvtier.Error) as caught:
                daemon.connect("engine", token="other-token")
            self.assertTrue(str(caught.exception).startswith("refused: "), str(caught.exception))

    def test_full_quota_is_refused(self):
        with Kvtierd(BLOCK, quota_blocks={"other": 2}) as daemon:
            c = daemon.connect("other")
            c.map_region(3 * BLOCK)
            self.assertEqual(c.batch_set(["a", "b"], [0, BLOCK]), [True, True])
            with self.assertRaises(kvtier.Error) as caught:
                c.batch_set(["c"], [2 * BLOCK])
            self.assertTrue(str(caught.exception).startswith("quota_exceeded: "), str(caught.exception))
            self.assertEqual(c.stats()["tenant_blocks"], 2)
            self.assertEqual(c.batch_exists(["a", "b", "c"]), 2)


if __name__ == "__main__":
    unittest.main()
