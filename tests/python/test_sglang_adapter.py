"""KvtierHiCacheStorage driven as SGLang's HiCacheController drives a storage
backend: register_mem_pool_host at start, batch_set_v1 on write-back,
batch_exists then batch_get_v1 on prefetch; every page checksummed."""

import hashlib
import threading
import types
import unittest

import torch

from kvtier.sglang import KvtierHiCacheStorage
from stores import Kvtierd, MemoryStore, needs_kvtierd


class HostPool:
    """SGLang's MHATokenToKVPoolHost in the page_first layout, reduced to what a
    storage backend uses: kv_buffer (2, tokens, layers, heads, head_dim) and
    the flat page accessors."""

    def __init__(self, tokens=256, page_size=16, layers=4, heads=2, head_dim=8, dtype=torch.float16, seed=0):
        self.page_size = page_size
        self.layout = "page_first"
        self.dtype = dtype
        self.size = tokens
        g = torch.Generator().manual_seed(seed)
        self.kv_buffer = torch.randn(2, tokens, layers, heads, head_dim, generator=g).to(dtype)

    def get_data_page(self, index, flat=True):
        page = self.kv_buffer[:, index:index + self.page_size]
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self):
        return torch.zeros_like(self.get_data_page(0))

    def set_from_flat_data_page(self, index, data_page):
        self.kv_buffer[:, index:index + self.page_size] = data_page.reshape(
            self.kv_buffer[:, index:index + self.page_size].shape)

    def page_checksum(self, index):
        return hashlib.sha256(self.get_data_page(index).numpy().tobytes()).hexdigest()


def storage_config(rank=0, size=1, mla=False, pp=(0, 1), cp=(0, 1)):
    return types.SimpleNamespace(tp_rank=rank, tp_size=size, pp_rank=pp[0], pp_size=pp[1], attn_cp_rank=cp[0],
                                 attn_cp_size=cp[1], is_mla_model=mla, is_page_first_layout=True,
                                 model_name="llama-3-8b", extra_config={"region_pages": 3})


def page_keys(n, salt="p"):
    # SGLang's keys: the hex SHA-256 of the page's tokens chained to its prefix.
    keys, prev = [], b""
    for i in range(n):
        prev = hashlib.sha256(prev + f"{salt}{i}".encode()).digest()
        keys.append(prev.hex())
    return keys


PAGE_BYTES = HostPool().get_dummy_flat_data_page().numel() * 2  # 4 KiB


class SGLangCallOrder(unittest.TestCase):
    """Against the in-process stand-in, with blocks exactly one page long."""

    def make_store(self, **options):
        return MemoryStore(block_bytes=PAGE_BYTES, **options)

    def setUp(self):
        self.store = self.make_store().__enter__()
        self.addCleanup(self.store.__exit__, None, None, None)

    def backend(self, config=None):
        return KvtierHiCacheStorage(config or storage_config(), client=self.store.connect("engine"))

    def test_write_back_then_prefetch_into_another_pool(self):
        writer_pool, reader_pool = HostPool(seed=1), HostPool(seed=2)
        writer, reader = self.backend(), self.backend()
        writer.register_mem_pool_host(writer_pool)
        reader.register_mem_pool_host(reader_pool)
        keys = page_keys(7)  # more pages than the 3 region slots: chunked round trips
        src = torch.arange(2 * 16, 9 * 16)  # pages at host tokens 32..143
        self.assertEqual(writer.batch_set_v1(keys, src), [True] * 7)

        self.assertEqual(reader.batch_exists(keys + page_keys(2, "other")), 7)
        dst = torch.arange(160 - 7 * 16, 160)
        self.assertEqual(reader.batch_get_v1(keys, dst), [True] * 7)
        for i in range(7):
            self.assertEqual(reader_pool.page_checksum(int(dst[i * 16])), writer_pool.page_checksum(int(src[i * 16])))
        # The rest of the reader's pool is untouched.
        self.assertEqual(reader_pool.page_checksum(0), HostPool(seed=2).page_checksum(0))

    def test_prefetch_and_write_back_threads_share_the_backend(self):
        # SGLang's HiCacheController calls one backend from its write-back thread
        # (batch_set_v1) and its prefetch threads (batch_exists, batch_get_v1) at once.
        backend, pool = self.backend(), HostPool(tokens=512, seed=7)
        backend.register_mem_pool_host(pool)
        keys, pages = page_keys(16), 16
        want = [pool.page_checksum(p * 16) for p in range(pages)]
        errors = []

        def write_back():
            try:
                for p in range(pages):
                    self.assertEqual(backend.batch_set_v1([keys[p]], torch.arange(p * 16, p * 16 + 16)), [True])
            except Exception as e:  # reported by the main thread
                errors.append(e)

        writer = threading.Thread(target=write_back)
        writer.start()
        loaded = 0
        while loaded < pages and not errors:
            hits = backend.batch_exists(keys[loaded:])
            if hits:
                dst = torch.arange(256 + loaded * 16, 256 + (loaded + hits) * 16)
                self.assertEqual(backend.batch_get_v1(keys[loaded:loaded + hits], dst), [True] * hits)
                loaded += hits
        writer.join()
        self.assertEqual(errors, [])
        self.assertEqual([pool.page_checksum(256 + p * 16) for p in range(pages)], want)

    def test_prefix_query_stops_at_the_first_miss(self):
        backend = self.backend()
        pool = HostPool(seed=3)
        backend.register_mem_pool_host(pool)
        keys = page_keys(4)
        backend.batch_set_v1([keys[0], keys[1], keys[3]], torch.cat([torch.arange(0, 32), torch.arange(48, 64)]))
        self.assertEqual(backend.batch_exists(keys), 2)
        self.assertFalse(backend.exists(keys[2]))
        self.assertTrue(backend.exists(keys[3]))
        self.assertEqual(backend.batch_get_v1(keys, torch.arange(64, 128)), [True, True, False, True])

    def test_tensor_parallel_ranks_keep_their_own_heads(self):
        rank0, rank1 = self.backend(storage_config(0, 2)), self.backend(storage_config(1, 2))
        for backend in (rank0, rank1):
            backend.register_mem_pool_host(HostPool(seed=4))
        keys = page_keys(2)
        rank0.batch_set_v1(keys, torch.arange(0, 32))
        self.assertEqual(rank0.batch_exists(keys), 2)
        self.assertEqual(rank1.batch_exists(keys), 0)
        # MLA ranks hold the same latent cache: one copy serves every rank.
        mla0, mla1 = self.backend(storage_config(0, 2, True)), self.backend(storage_config(1, 2, True))
        for backend in (mla0, mla1):
            backend.register_mem_pool_host(HostPool(seed=5))
        mla0.batch_set_v1(keys, torch.arange(0, 32))
        self.assertEqual(mla1.batch_exists(keys), 2)

    def test_pipeline_stages_and_context_parallel_ranks_keep_their_own_pages(self):
        keys = page_keys(2)
        writer = self.backend(storage_config(mla=True, pp=(0, 2)))
        writer.register_mem_pool_host(HostPool(seed=6))
        writer.batch_set_v1(keys, torch.arange(0, 32))
        for other, held in ((storage_config(mla=True, pp=(0, 2)), 2), (storage_config(mla=True, pp=(1, 2)), 0),
                            (storage_config(mla=True, pp=(0, 2), cp=(1, 2)), 0)):
            backend = self.backend(other)
            backend.register_mem_pool_host(HostPool(seed=6))
            self.assertEqual(backend.batch_exists(keys), held)

    def test_tensor_get_and_set(self):
        backend = self.backend()
        pool = HostPool(seed=6)
        backend.register_mem_pool_host(pool)
        page = pool.get_data_page(16).clone()
        self.assertTrue(backend.set("k", page))
        self.assertIsNone(backend.get("missing"))
        target = torch.empty_like(page)
        got = backend.get("k", target)
        self.assertIs(got, target)
        self.assertTrue(torch.equal(got, page))
        self.assertEqual(backend.batch_get(["k", "missing"])[1], None)
        self.assertTrue(torch.equal(backend.batch_get(["k"])[0], page))

    def test_a_full_quota_and_a_lost_daemon_read_as_misses(self):
        with self.make_store(quota_blocks={"engine": 2}) as store:
            backend = KvtierHiCacheStorage(storage_config(), client=store.connect("engine"))
            pool = HostPool(seed=8)
            backend.register_mem_pool_host(pool)
            keys = page_keys(3)
            self.assertEqual(backend.batch_set_v1(keys[:2], torch.arange(0, 32)), [True, True])
            with self.assertLogs("kvtier", "WARNING") as logs:
                self.assertEqual(backend.batch_set_v1(keys[2:], torch.arange(32, 48)), [False])
            self.assertIn("quota_exceeded", logs.output[0])
            self.assertEqual(backend.batch_exists(keys), 2)
            store.kill()
            before = pool.page_checksum(64)
            with self.assertLogs("kvtier", "WARNING") as logs:
                self.assertEqual(backend.batch_exists(keys), 0)
                self.assertEqual(backend.batch_get_v1(keys[:2], torch.arange(64, 96)), [False, False])
                self.assertEqual(backend.batch_set_v1(keys[:1], torch.arange(0, 16)), [False])
            self.assertEqual(len(logs.output), 3)
            self.assertEqual(pool.page_checksum(64), before)

    def test_page_larger_than_a_block_is_refused(self):
        backend = self.backend()
        with self.assertRaises(ValueError) as caught:
            backend.register_mem_pool_host(HostPool(head_dim=128))
        self.assertIn(f"kvtierd's blocks are {self.store.block_bytes}", str(caught.exception))


@needs_kvtierd
class SGLangCallOrderOnKvtierd(SGLangCallOrder):
    """Against kvtierd in a child process, with blocks of two pages (a page fills part of a block)."""

    def make_store(self, **options):
        return Kvtierd(block_bytes=2 * PAGE_BYTES, **options)


if __name__ == "__main__":
    unittest.main()
