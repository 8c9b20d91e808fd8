"""KvtierOffloadingSpec driven as vLLM's OffloadingConnector drives a spec:
the scheduler's manager (lookup, prepare_store / complete_store,
prepare_load / complete_load) and the worker's handler (transfer_async,
get_finished) in the connector's order; every block checksummed. Both the
v0.11.0 shapes (a dict of per-layer caches) and later main's (kv_cache_config,
CanonicalKVCaches, TransferResult, block_indices) are driven."""

import hashlib
import types
import unittest

import torch

from kvtier.vllm import GPULoadStoreSpec, KvtierOffloadingSpec
from stores import Kvtierd, MemoryStore, needs_kvtierd

GPU_BLOCK = 16
LAYERS, HEADS, HEAD_SIZE, GPU_BLOCKS = 3, 2, 8, 32


def vllm_config(block_size=32, tp_size=1, rank=0):
    return types.SimpleNamespace(
        kv_transfer_config=types.SimpleNamespace(kv_connector_extra_config={
            "endpoint": "unused", "tenant": "engine", "block_size": block_size, "region_blocks": 2}),
        cache_config=types.SimpleNamespace(block_size=GPU_BLOCK),
        parallel_config=types.SimpleNamespace(tensor_parallel_size=tp_size, rank=rank))


def kv_caches(seed):
    # FlashAttention's layout: (2, num_blocks, block_size, num_kv_heads, head_size) per layer.
    g = torch.Generator().manual_seed(seed)
    return {f"model.layers.{i}.self_attn": torch.randn(2, GPU_BLOCKS, GPU_BLOCK, HEADS, HEAD_SIZE, generator=g).half()
            for i in range(LAYERS)}


def gpu_checksum(caches, gpu_ids):
    h = hashlib.sha256()
    for name in sorted(caches):
        h.update(caches[name][:, gpu_ids].contiguous().numpy().tobytes())
    return h.hexdigest()


def block_hashes(n, salt=b"r"):
    out, prev = [], b""
    for i in range(n):
        prev = hashlib.sha256(prev + salt + bytes([i])).digest()
        out.append(prev)  # vLLM's BlockHash: bytes
    return out


def finished(handler):
    """get_finished's TransferResults as (job_id, success) pairs."""
    return [(r.job_id, r.success) for r in handler.get_finished()]


def kv_cache_config(block_sizes=(GPU_BLOCK,)):
    return types.SimpleNamespace(kv_cache_groups=[
        types.SimpleNamespace(kv_cache_spec=types.SimpleNamespace(block_size=b)) for b in block_sizes])


def canonical(caches):
    """vLLM's CanonicalKVCaches of FlashAttention caches: K and V of each layer
    split into (num_blocks, page bytes) int8 tensors, in layer name order."""
    tensors = []
    for name in sorted(caches):
        for kv in caches[name]:
            rows = kv.view(torch.int8).view(GPU_BLOCKS, -1)
            tensors.append(types.SimpleNamespace(tensor=rows, page_size_bytes=rows.shape[1]))
    return types.SimpleNamespace(tensors=tensors, group_data_refs=[])


# 2 GPU blocks per offloaded block, 3 layers, K and V, fp16: 6 KiB.
OFFLOADED_BYTES = LAYERS * 2 * 2 * GPU_BLOCK * HEADS * HEAD_SIZE * 2


class VllmCallOrder(unittest.TestCase):
    """Against the in-process stand-in, with blocks exactly one offloaded block long."""

    def make_store(self):
        return MemoryStore(block_bytes=OFFLOADED_BYTES)

    def setUp(self):
        self.store = self.make_store().__enter__()
        self.addCleanup(self.store.__exit__, None, None, None)

    def spec(self, config):
        return KvtierOffloadingSpec(config, connect=lambda settings: self.store.connect(settings.tenant))

    def test_store_then_load_into_other_gpu_blocks(self):
        spec = self.spec(vllm_config())
        manager = spec.get_manager()
        caches = kv_caches(1)
        handlers = list(spec.get_handlers(caches))
        self.assertEqual([(s.medium(), d.medium()) for s, d, _ in handlers], [("GPU", "KVTIER"), ("KVTIER", "GPU")])
        handler = handlers[0][2]
        hashes = block_hashes(5)  # 5 offloaded blocks = 10 GPU blocks, through 2 region slots
        src_ids = [3, 4, 10, 11, 0, 1, 20, 21, 6, 7]

        self.assertEqual(manager.lookup(hashes), 0)
        out = manager.prepare_store(hashes)
        self.assertEqual(out.block_hashes_to_store, hashes)
        self.assertEqual(out.block_hashes_evicted, [])
        self.assertTrue(handler.transfer_async(1, (GPULoadStoreSpec(src_ids), out.store_spec)))
        self.assertEqual(finished(handler), [(1, True)])
        self.assertEqual(finished(handler), [])
        manager.complete_store(out.block_hashes_to_store)

        # A second engine with its own GPU memory finds and loads the prefix.
        other = self.spec(vllm_config())
        other_manager, other_caches = other.get_manager(), kv_caches(2)
        load_handler = list(other.get_handlers(other_caches))[1][2]
        query = hashes[:3] + block_hashes(1, b"new")
        self.assertEqual(other_manager.lookup(query), 3)
        load_spec = other_manager.prepare_load(query[:3])
        self.assertEqual(other_manager.client.stats()["tenant_pinned"], 3)
        dst_ids = [30, 31, 14, 15, 8, 9]
        self.assertTrue(load_handler.transfer_async(7, (load_spec, GPULoadStoreSpec(dst_ids))))
        self.assertEqual(finished(load_handler), [(7, True)])
        other_manager.complete_load(query[:3])
        self.assertEqual(other_manager.client.stats()["tenant_pinned"], 0)
        for i in range(3):
            self.assertEqual(gpu_checksum(other_caches, dst_ids[2 * i:2 * i + 2]),
                             gpu_checksum(caches, src_ids[2 * i:2 * i + 2]))
        # GPU blocks outside the load are untouched.
        self.assertEqual(gpu_checksum(other_caches, [0, 1, 2]), gpu_checksum(kv_caches(2), [0, 1, 2]))

    def test_loading_a_missing_block_fails_the_job(self):
        spec = self.spec(vllm_config())
        spec.get_manager()
        handler = list(spec.get_handlers(kv_caches(3)))[1][2]
        missing = spec.get_manager().prepare_load(block_hashes(1, b"gone"))
        self.assertTrue(handler.transfer_async(4, (missing, GPULoadStoreSpec([0, 1]))))
        self.assertEqual(finished(handler), [(4, False)])

    def test_a_lost_daemon_reads_as_a_miss_and_failed_transfers(self):
        spec = self.spec(vllm_config())
        manager, caches = spec.get_manager(), kv_caches(7)
        store_handler, load_handler = [h for _, _, h in spec.get_handlers(caches)]
        hashes = block_hashes(2)
        out = manager.prepare_store(hashes)
        store_handler.transfer_async(1, (GPULoadStoreSpec([0, 1, 2, 3]), out.store_spec))
        self.assertEqual(finished(store_handler), [(1, True)])
        self.assertEqual(manager.lookup(hashes), 2)
        self.store.kill()
        before = gpu_checksum(caches, [8, 9, 10, 11])
        with self.assertLogs("kvtier", "WARNING"):
            self.assertEqual(manager.lookup(hashes), 0)
            load = manager.prepare_load(hashes)
            self.assertTrue(load_handler.transfer_async(2, (load, GPULoadStoreSpec([8, 9, 10, 11]))))
            self.assertTrue(store_handler.transfer_async(3, (GPULoadStoreSpec([4, 5, 6, 7]), out.store_spec)))
            manager.complete_load(hashes)
        self.assertEqual(finished(load_handler) + finished(store_handler), [(2, False), (3, False)])
        self.assertEqual(gpu_checksum(caches, [8, 9, 10, 11]), before)

    def test_ranks_store_their_own_shards(self):
        rank0, rank1 = self.spec(vllm_config(tp_size=2, rank=0)), self.spec(vllm_config(tp_size=2, rank=1))
        caches0, caches1 = kv_caches(4), kv_caches(5)
        h0, h1 = list(rank0.get_handlers(caches0))[0][2], list(rank1.get_handlers(caches1))[0][2]
        hashes = block_hashes(2)
        out = rank0.get_manager().prepare_store(hashes)
        h0.transfer_async(1, (GPULoadStoreSpec([0, 1, 2, 3]), out.store_spec))
        # Rank 1 has not stored its shard yet: the manager sees rank 0's keys.
        self.assertEqual(rank0.get_manager().lookup(hashes), 2)
        h1.transfer_async(1, (GPULoadStoreSpec([0, 1, 2, 3]), out.store_spec))
        loader = list(self.spec(vllm_config(tp_size=2, rank=1)).get_handlers(kv_caches(6)))[1][2]
        target = loader.layers
        loader.transfer_async(2, (out.store_spec, GPULoadStoreSpec([8, 9, 10, 11])))
        self.assertEqual(finished(loader), [(2, True)])
        for i in range(LAYERS):
            self.assertTrue(torch.equal(target[i][:, 8:12], caches1[sorted(caches1)[i]][:, 0:4]))

    def test_later_vllm_shapes_canonical_caches_and_an_unaligned_load(self):
        def spec():
            return KvtierOffloadingSpec(vllm_config(), kv_cache_config(),
                                        connect=lambda settings: self.store.connect(settings.tenant))

        storer, loader = spec(), spec()
        self.assertEqual(storer.block_size_factors, (2,))
        caches, other = kv_caches(8), kv_caches(9)
        store_handler = list(storer.get_handlers(canonical(caches)))[0][2]
        load_handler = list(loader.get_handlers(canonical(other)))[1][2]
        hashes = block_hashes(3)
        out = storer.get_manager().prepare_store(hashes)
        self.assertTrue(store_handler.transfer_async(1, (GPULoadStoreSpec([0, 1, 2, 3, 4, 5], [6]), out.store_spec)))
        result = store_handler.get_finished()[0]
        self.assertEqual((result.job_id, result.success, result.transfer_type), (1, True, ("GPU", "KVTIER")))
        self.assertEqual(result.transfer_size, 3 * OFFLOADED_BYTES)
        # The load starts at GPU block 3 of the request: the first offloaded
        # block (GPU blocks 2-3) gives only its second half.
        load = loader.get_manager().prepare_load(hashes[1:])
        self.assertTrue(load_handler.transfer_async(2, (load, GPULoadStoreSpec([20, 21, 22], [3], [3]))))
        self.assertEqual(finished(load_handler), [(2, True)])
        load_handler.wait({2})
        self.assertEqual(gpu_checksum(other, [20, 21, 22]), gpu_checksum(caches, [3, 4, 5]))
        self.assertEqual(gpu_checksum(other, [19, 23]), gpu_checksum(kv_caches(9), [19, 23]))

    def test_several_kv_cache_groups_are_refused(self):
        with self.assertRaises(ValueError):
            KvtierOffloadingSpec(vllm_config(), kv_cache_config((16, 32)), connect=lambda settings: None)

    def test_block_size_must_be_a_multiple_of_the_gpus(self):
        with self.assertRaises(ValueError):
            self.spec(vllm_config(block_size=24))


@needs_kvtierd
class VllmCallOrderOnKvtierd(VllmCallOrder):
    """Against kvtierd in a child process (8 KiB blocks: an offloaded block fills part of one)."""

    def make_store(self):
        return Kvtierd(block_bytes=8192)


if __name__ == "__main__":
    unittest.main()
