"""kvtier.Client's Python side over the raw client interface: block keys,
zero-copy numpy and torch views of the region, offsets taken from views."""

import threading
import unittest

import numpy as np
import torch

import kvtier
from kvtier.region_slots import RegionFull, RegionSlots
from stores import Kvtierd, MemoryStore, needs_kvtierd

BLOCK = 4096


class Keys(unittest.TestCase):
    def test_a_16_byte_key_is_itself_and_other_names_are_hashed(self):
        key = bytes(range(1, 17))
        self.assertIs(kvtier.block_key(key), key)
        self.assertEqual(len(kvtier.block_key("abc")), 16)
        self.assertEqual(kvtier.block_key("abc"), kvtier.block_key("abc"))
        self.assertNotEqual(kvtier.block_key("abc"), kvtier.block_key(b"abc"))
        self.assertNotEqual(kvtier.block_key("abc"), kvtier.block_key("abc", b"rank1"))
        self.assertNotEqual(kvtier.block_key(key, b"scope"), key)
        self.assertNotEqual(kvtier.block_key(bytes(16)), bytes(16))  # the reserved key is never produced
        with self.assertRaises(TypeError):
            kvtier.block_key(1.5)


class RegionViews(unittest.TestCase):
    def make_store(self):
        return MemoryStore(block_bytes=BLOCK)

    def setUp(self):
        self.store = self.make_store().__enter__()
        self.addCleanup(self.store.__exit__, None, None, None)
        self.client = self.store.connect("engine")
        self.client.map_region(4 * BLOCK)

    def test_numpy_and_torch_views_share_the_region(self):
        blocks = self.client.numpy(np.uint32, blocks=True)
        self.assertEqual(blocks.shape, (4, BLOCK // 4))
        blocks[0] = np.arange(BLOCK // 4, dtype=np.uint32)
        tensor = self.client.torch(torch.int32, blocks=True)
        self.assertEqual(int(tensor[0, 1000]), 1000)
        self.assertEqual(self.client.stats()["tenant_blocks"], 0)
        self.assertEqual(self.client.batch_set(["a"], [blocks[0]]), [True])
        self.assertEqual(self.client.batch_get(["a", "b"], [tensor[2], 3 * BLOCK]), [True, False])
        self.assertTrue(np.array_equal(blocks[2], blocks[0]))
        self.assertFalse(blocks[3].any())
        self.assertEqual(self.client.batch_exists(["a", "b", "a"]), 1)

    def test_views_outside_one_block_are_refused(self):
        region = self.client.numpy()
        with self.assertRaises(ValueError):
            self.client.offset_of(region[:BLOCK - 1])
        with self.assertRaises(ValueError):
            self.client.offset_of(np.zeros(BLOCK, np.uint8))
        with self.assertRaises(ValueError):
            self.client.offset_of(self.client.numpy(blocks=True)[:, 0])
        self.assertEqual(self.client.offset_of(region[BLOCK:2 * BLOCK]), BLOCK)
        with self.assertRaises(ValueError):
            self.client.batch_set(["a", "b"], [0])

    def test_pins_are_counted(self):
        self.client.batch_set(["a", "b"], [0, BLOCK])
        self.assertEqual(self.client.pin(["a", "b", "c"]), 2)
        self.assertEqual(self.client.release(["a"]), 1)
        self.assertEqual(self.client.stats()["tenant_pinned"], 1)


@needs_kvtierd
class RegionViewsOnKvtierd(RegionViews):
    def make_store(self):
        return Kvtierd(block_bytes=BLOCK)

    def test_one_region_per_client(self):
        with self.assertRaises(kvtier.Error) as caught:
            self.client.map_region(BLOCK)
        self.assertIn("mapped its region already", str(caught.exception))


class Slots(unittest.TestCase):
    def test_slots_are_handed_out_once_until_given_back(self):
        slots = RegionSlots(10_000, 4096)
        self.assertEqual(slots.count, 2)
        with self.assertRaises(RegionFull):
            slots.take(3)
        self.assertEqual(slots.take(2), [0, 4096])
        taken = []
        waiter = threading.Thread(target=lambda: taken.append(slots.take(1)))
        waiter.start()
        waiter.join(0.05)
        self.assertEqual(taken, [])  # waits: no slot is free
        slots.give_back([4096])
        waiter.join()
        self.assertEqual(taken, [[4096]])
        with self.assertRaises(ValueError):
            slots.give_back([100])


if __name__ == "__main__":
    unittest.main()
