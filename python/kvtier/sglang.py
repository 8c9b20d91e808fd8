"""kvtierd as SGLang's HiCache storage backend (the L3 tier under its host pool).

KvtierHiCacheStorage has the methods of SGLang's HiCacheStorage
(sglang/srt/mem_cache/hicache_storage.py; docs/python.md names the commits):
register_mem_pool_host, batch_exists, batch_get_v1, batch_set_v1, and the
older exists / get / set / batch_get / batch_set.

A page of SGLang's host pool (page_size tokens, every layer's K and V, as
HostKVCache.get_data_page(index, flat=True) lays it out) is one kvtier
block. Pages travel through the client's shared-memory region: a set copies
each page into a region slot and the daemon takes it from there; a get has
the daemon fill region slots and copies each found page into the host pool
(HostKVCache.set_from_flat_data_page). No page crosses the socket.

Keys: SGLang's page keys (hex strings) hashed with the model and, for MHA
models, the tensor-parallel rank and size, since each rank holds its own
heads; MLA ranks hold the same latent cache and share keys. Pipeline stages
(pp_size > 1) hold different layers and attention context-parallel ranks
(attn_cp_size > 1) different slices of each page, so both scope keys too,
as SGLang's own file backend does.

A refusal or a lost daemon reads as misses and unstored pages (_refusals.py),
never as an exception in SGLang's prefetch or write-back threads.
"""

import torch

from ._engine_base import engine_class
from ._refusals import answered
from .keys import block_keys
from .region_slots import RegionSlots

HiCacheStorage = engine_class("sglang.srt.mem_cache.hicache_storage", "HiCacheStorage")

# Pages staged per round trip when the engine does not say: 64 pages of a
# 2 MiB block are 128 MiB of region, about what a prefetch of one long prompt moves.
DEFAULT_REGION_PAGES = 64


def _get(config, name, default=None):
    if config is None:
        return default
    if isinstance(config, dict):
        return config.get(name, default)
    return getattr(config, name, default)


class KvtierHiCacheStorage(HiCacheStorage):
    """storage_config: SGLang's HiCacheStorageConfig (tp_rank, tp_size,
    pp_rank, pp_size, attn_cp_rank, attn_cp_size, is_mla_model, model_name,
    extra_config) or a dict with those keys.
    extra_config (or keyword arguments) names the daemon: endpoint, tenant,
    token, region_pages. `client` passes a connected kvtier.Client instead.
    """

    def __init__(self, storage_config=None, kwargs=None, *, client=None, **options):
        options = {**(_get(storage_config, "extra_config") or {}), **(kwargs or {}), **options}
        if client is None:
            from .client import Client

            client = Client(options["endpoint"], tenant=options.get("tenant", ""), token=options.get("token", ""))
        self.client = client
        self.region_pages = int(options.get("region_pages", DEFAULT_REGION_PAGES))
        rank, size = int(_get(storage_config, "tp_rank", 0)), int(_get(storage_config, "tp_size", 1))
        scope = f"sglang/{_get(storage_config, 'model_name', '') or ''}"
        if not _get(storage_config, "is_mla_model", False):
            scope += f"/tp{rank}of{size}"
        for part in ("pp", "attn_cp"):
            part_size = int(_get(storage_config, f"{part}_size", 1) or 1)
            if part_size > 1:
                scope += f"/{part}{int(_get(storage_config, f'{part}_rank', 0) or 0)}of{part_size}"
        self.scope = scope.encode()
        self.mem_pool_host = None
        self._slots = None
        self._region = None

    # --- the host pool ----------------------------------------------------------------

    def register_mem_pool_host(self, mem_pool_host):
        """Sizes the staging region for mem_pool_host's pages (one page, one block)."""
        page = mem_pool_host.get_dummy_flat_data_page()
        self.page_dtype = page.dtype
        self.page_numel = page.numel()
        self.page_bytes = page.numel() * page.element_size()
        block_bytes = self.client.block_bytes
        if self.page_bytes > block_bytes:
            raise ValueError(
                f"a host pool page is {self.page_bytes} bytes ({mem_pool_host.page_size} tokens), kvtierd's blocks "
                f"are {block_bytes}: set the daemon's block size to at least the page size")
        self.mem_pool_host = mem_pool_host
        region = self.client.map_region(self.region_pages * block_bytes)
        self._region = torch.frombuffer(region, dtype=torch.uint8)
        self._slots = RegionSlots(len(region), block_bytes)

    def _keys(self, keys):
        return block_keys(keys, self.scope)

    def _page_starts(self, n, host_indices):
        page_size = self.mem_pool_host.page_size
        if len(host_indices) < n * page_size:
            raise ValueError(f"{n} keys need {n * page_size} host indices, got {len(host_indices)}")
        return [int(i) for i in host_indices[: n * page_size : page_size]]

    def _staged(self, offset):
        return self._region[offset:offset + self.page_bytes]

    def _chunks(self, n):
        step = self._slots.count
        for start in range(0, n, step):
            yield start, min(n, start + step)

    # --- the v1 interface: pages of the registered host pool ----------------------------

    def batch_exists(self, keys, extra_info=None):
        """How many of keys, from the first, the daemon holds."""
        if not keys:
            return 0
        return answered(lambda: self.client.batch_exists(self._keys(keys)), 0, "batch_exists")

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        """Stores the host pool's pages at host_indices (page_size indices per key)."""
        starts = self._page_starts(len(keys), host_indices)
        keys = self._keys(keys)
        stored = []
        for lo, hi in self._chunks(len(keys)):
            offsets = self._slots.take(hi - lo)
            try:
                for start, offset in zip(starts[lo:hi], offsets):
                    # The page as the pool holds it (strided in most layouts), copied
                    # once into the region in flat order: no flattened temporary.
                    page = self.mem_pool_host.get_data_page(start, flat=False)
                    self._staged(offset).view(page.dtype).view(page.shape).copy_(page)
                stored += answered(lambda: list(self.client.batch_set(keys[lo:hi], offsets)), [False] * (hi - lo),
                                   "batch_set")
            finally:
                self._slots.give_back(offsets)
        return stored

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        """Loads the daemon's blocks into the host pool at host_indices; True for each key found."""
        starts = self._page_starts(len(keys), host_indices)
        keys = self._keys(keys)
        found = []
        for lo, hi in self._chunks(len(keys)):
            offsets = self._slots.take(hi - lo)
            try:
                got = answered(lambda: list(self.client.batch_get(keys[lo:hi], offsets)), [False] * (hi - lo),
                               "batch_get")
                for start, offset, ok in zip(starts[lo:hi], offsets, got):
                    if ok:
                        page = self._staged(offset).view(self.page_dtype)
                        self.mem_pool_host.set_from_flat_data_page(start, page)
                found += got
            finally:
                self._slots.give_back(offsets)
        return found

    # --- the older interface: tensors the caller holds ----------------------------------

    def exists(self, key):
        return self.batch_exists([key]) == 1

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Each key's page as a tensor (into target_locations[i] when given), or None."""
        keys_ = self._keys(keys)
        out = []
        for lo, hi in self._chunks(len(keys_)):
            offsets = self._slots.take(hi - lo)
            try:
                got = answered(lambda: list(self.client.batch_get(keys_[lo:hi], offsets)), [False] * (hi - lo),
                               "batch_get")
                for i, (offset, ok) in enumerate(zip(offsets, got), start=lo):
                    if not ok:
                        out.append(None)
                        continue
                    page = self._staged(offset).view(self.page_dtype)
                    target = None if target_locations is None else target_locations[i]
                    if target is None:
                        out.append(page.clone())
                    else:
                        target.view(-1).copy_(page)
                        out.append(target)
            finally:
                self._slots.give_back(offsets)
        return out

    def get(self, key, target_location=None, target_sizes=None):
        return self.batch_get([key], None if target_location is None else [target_location])[0]

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        """Stores each tensor of values under its key; True when every one is stored."""
        if values is None:
            values = target_locations
        keys_ = self._keys(keys)
        stored = []
        for lo, hi in self._chunks(len(keys_)):
            offsets = self._slots.take(hi - lo)
            try:
                for value, offset in zip(values[lo:hi], offsets):
                    data = value.contiguous().view(-1).view(torch.uint8)
                    if data.numel() != self.page_bytes:
                        raise ValueError(f"a page is {self.page_bytes} bytes, got a tensor of {data.numel()}")
                    self._staged(offset).copy_(data)
                stored += answered(lambda: list(self.client.batch_set(keys_[lo:hi], offsets)), [False] * (hi - lo),
                                   "batch_set")
            finally:
                self._slots.give_back(offsets)
        return all(stored)

    def set(self, key, value=None, target_location=None, target_sizes=None):
        return self.batch_set([key], [value if value is not None else target_location])

    def clear(self):
        """A no-op: the daemon's blocks are shared with other engines and leave by its eviction policy."""

    def get_stats(self):
        return answered(self.client.stats, None, "stats")
