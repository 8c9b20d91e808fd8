"""kvtierd as vLLM's KV offloading medium (the OffloadingConnector's spec).

Shapes follow two generations of vllm/v1/kv_offload/ (docs/python.md names
the commits): abstract.py (LoadStoreSpec, OffloadingManager with lookup /
prepare_load / touch / complete_load / prepare_store / complete_store /
take_events, PrepareStoreOutput), spec.py (OffloadingSpec), worker/worker.py
(OffloadingHandler) and mediums.py (GPULoadStoreSpec). Where they differ:

  v0.11.0                                  later main
  OffloadingSpec(vllm_config)              OffloadingSpec(vllm_config, kv_cache_config)
  get_handlers(kv_caches: {name: tensor},  get_handlers(kv_caches: CanonicalKVCaches),
               attn_backends)              tensors of (num_blocks, page bytes)
  get_finished() -> [(job_id, ok)]         get_finished() -> [TransferResult]; wait(job_ids)
  GPULoadStoreSpec(block_ids)              GPULoadStoreSpec(block_ids, group_sizes, block_indices)

The adapter takes either call; get_finished answers in the installed vLLM's
shape (TransferResult where vLLM has none installed).

The scheduler side (KvtierOffloadingManager) asks the daemon by block hash;
the worker side (KvtierOffloadingHandler) copies between vLLM's paged GPU KV
caches and the daemon through the client's shared-memory region. One
offloaded block (block_size tokens: block_size / gpu_block_size GPU blocks)
is one kvtier block: for each layer in name order, that layer's
cache[:, gpu_block_ids] (K and V of the GPU blocks), contiguous; with
canonical caches, each canonical tensor's rows of the GPU blocks, in order.
A load whose first GPU block starts inside an offloaded block
(block_indices) skips that block's leading GPU blocks.

Keys: vLLM's block hashes, hashed with the tensor-parallel rank and size
(each rank holds its own heads). The manager sees every rank's keys: lookup
asks for rank 0's, pins and releases cover all ranks'.

A refusal or a lost daemon reads as a miss (lookup 0) or a failed transfer
(_refusals.py), never as an exception in vLLM's scheduler or worker.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ._engine_base import engine_class
from ._refusals import answered
from .keys import block_keys
from .region_slots import RegionSlots

LoadStoreSpec = engine_class("vllm.v1.kv_offload.abstract", "LoadStoreSpec")
OffloadingManager = engine_class("vllm.v1.kv_offload.abstract", "OffloadingManager")
OffloadingSpec = engine_class("vllm.v1.kv_offload.spec", "OffloadingSpec")
OffloadingHandler = engine_class("vllm.v1.kv_offload.worker.worker", "OffloadingHandler")
_PrepareStoreOutput = engine_class("vllm.v1.kv_offload.abstract", "PrepareStoreOutput")
_GPULoadStoreSpec = engine_class("vllm.v1.kv_offload.mediums", "GPULoadStoreSpec")
_TransferResult = engine_class("vllm.v1.kv_offload.worker.worker", "TransferResult")

MEDIUM = "KVTIER"


@dataclass
class _StandalonePrepareStoreOutput:
    """vLLM's PrepareStoreOutput (used when vLLM is not installed)."""

    block_hashes_to_store: list
    store_spec: object
    block_hashes_evicted: list


@dataclass
class _StandaloneTransferResult:
    """vLLM's TransferResult (used when vLLM is not installed)."""

    job_id: int
    success: bool
    transfer_size: int | None = None
    transfer_time: float | None = None
    transfer_type: tuple | None = None


class _StandaloneGPULoadStoreSpec:
    """vLLM's GPULoadStoreSpec (used when vLLM is not installed): GPU block ids,
    and for loads the block index of the first one (block_indices)."""

    def __init__(self, block_ids, group_sizes=None, block_indices=None):
        self.block_ids = np.array(block_ids, dtype=np.int64)
        self.group_sizes = group_sizes if group_sizes is not None else (len(block_ids),)
        self.block_indices = block_indices

    @staticmethod
    def medium():
        return "GPU"


PrepareStoreOutput = _StandalonePrepareStoreOutput if _PrepareStoreOutput is object else _PrepareStoreOutput
GPULoadStoreSpec = _StandaloneGPULoadStoreSpec if _GPULoadStoreSpec is object else _GPULoadStoreSpec
# vLLM v0.11.0 reports (job_id, ok) pairs and has no TransferResult.
_RESULT_PAIRS = OffloadingHandler is not object and _TransferResult is object
TransferResult = _StandaloneTransferResult if _TransferResult is object else _TransferResult


class KvtierLoadStoreSpec(LoadStoreSpec):
    """Blocks in kvtierd, by vLLM block hash."""

    def __init__(self, block_hashes):
        self.block_hashes = list(block_hashes)

    @staticmethod
    def medium():
        return MEDIUM

    def __repr__(self):
        return f"KvtierLoadStoreSpec({len(self.block_hashes)} blocks)"


def rank_scope(rank, size):
    return f"vllm/tp{rank}of{size}".encode()


class KvtierOffloadingManager(OffloadingManager):
    """The scheduler's view: which blocks kvtierd holds, pinned while vLLM loads them."""

    def __init__(self, client, tp_size=1, block_size=16):
        self.client = client
        self.tp_size = tp_size
        self.block_size = block_size
        self._scopes = [rank_scope(r, tp_size) for r in range(tp_size)]

    def _all_ranks(self, block_hashes):
        return [k for scope in self._scopes for k in block_keys(block_hashes, scope)]

    def lookup(self, block_hashes):
        """How many blocks, from the first, kvtierd holds."""
        keys = block_keys(list(block_hashes), self._scopes[0])
        return answered(lambda: self.client.batch_exists(keys), 0, "lookup") if keys else 0

    def prepare_load(self, block_hashes):
        """Pins the blocks until complete_load, so no eviction races the load."""
        block_hashes = list(block_hashes)
        answered(lambda: self.client.pin(self._all_ranks(block_hashes)), 0, "pin")
        return KvtierLoadStoreSpec(block_hashes)

    def touch(self, block_hashes):
        """kvtierd's tiers keep their own recency; a hit on load counts as use."""

    def complete_load(self, block_hashes):
        answered(lambda: self.client.release(self._all_ranks(list(block_hashes))), 0, "release")

    def prepare_store(self, block_hashes):
        """Every block is offered to the daemon (a block it holds is acknowledged
        without being copied again); it evicts by its own policy, so nothing is
        reported evicted here."""
        block_hashes = list(block_hashes)
        return PrepareStoreOutput(block_hashes_to_store=block_hashes, store_spec=KvtierLoadStoreSpec(block_hashes),
                                  block_hashes_evicted=[])

    def complete_store(self, block_hashes, success=True):
        """The handler's batch_set has acknowledged the blocks; nothing is left to do."""

    def take_events(self):
        return ()


def _kv_block_dim(cache):
    # FlashAttention's (2, num_blocks, block_size, heads, head_size): blocks on dim 1;
    # layouts without the leading K/V dimension keep them on dim 0.
    return 1 if cache.dim() == 5 and cache.shape[0] == 2 else 0


class KvtierOffloadingHandler(OffloadingHandler):
    """A worker's copies between its GPU KV caches and kvtierd.

    transfer_async runs the whole transfer before it returns (the daemon's
    copy is synchronous on this connection); get_finished reports it once.
    A transfer in which some block was not stored or not found reports False
    for the job, as vLLM's handlers do for a failed copy.
    """

    def __init__(self, client, kv_caches, gpu_blocks_per_block=1, tp_rank=0, tp_size=1, region_blocks=64):
        self.client = client
        if hasattr(kv_caches, "tensors"):  # CanonicalKVCaches: (num_blocks, ...) each
            self.layers = [t.tensor for t in kv_caches.tensors]
            self._dims = [0] * len(self.layers)
        else:  # {layer name: cache}
            self.layers = [kv_caches[name] for name in sorted(kv_caches)]
            self._dims = [_kv_block_dim(c) for c in self.layers]
        self.factor = gpu_blocks_per_block
        self.scope = rank_scope(tp_rank, tp_size)
        self.block_bytes = sum(self._gpu_block_bytes(c, d) for c, d in zip(self.layers, self._dims)) * self.factor
        if self.block_bytes > client.block_bytes:
            raise ValueError(f"an offloaded block is {self.block_bytes} bytes ({len(self.layers)} layers, "
                             f"{self.factor} GPU blocks), kvtierd's blocks are {client.block_bytes}")
        region = client.map_region(region_blocks * client.block_bytes)
        self._region = torch.frombuffer(region, dtype=torch.uint8)
        self._slots = RegionSlots(len(region), client.block_bytes)
        self._finished = []

    @staticmethod
    def _gpu_block_bytes(cache, dim):
        return cache.numel() // cache.shape[dim] * cache.element_size()

    def _gpu_ids(self, gpu_spec, n):
        """Per offloaded block: (its GPU block ids, how many of its leading GPU blocks to skip)."""
        ids = [int(i) for i in np.asarray(gpu_spec.block_ids)]
        indices = getattr(gpu_spec, "block_indices", None)
        skip = int(indices[0]) % self.factor if indices else 0
        if len(ids) != n * self.factor - skip:
            raise ValueError(f"{n} offloaded blocks need {n * self.factor - skip} GPU blocks, got {len(ids)}")
        out, at = [], 0
        for i in range(n):
            first = skip if i == 0 else 0
            out.append((ids[at:at + self.factor - first], first))
            at += self.factor - first
        return out

    def _layer_slices(self, offset):
        """(layer cache, block dim, the block's bytes of that layer in the region) in block layout order."""
        at = offset
        for cache, dim in zip(self.layers, self._dims):
            n = self._gpu_block_bytes(cache, dim) * self.factor
            yield cache, dim, self._region[at:at + n]
            at += n

    def _store(self, ids, offset):
        ids, _ = ids  # stores are aligned to offloaded blocks
        index = torch.tensor(ids, device=self.layers[0].device)
        for cache, dim, staged in self._layer_slices(offset):
            data = cache.index_select(dim, index)  # gathered on the cache's device, then one copy into the region
            staged.view(cache.dtype).view(data.shape).copy_(data)

    def _load(self, ids, offset):
        ids, skip = ids
        index = torch.tensor(ids, device=self.layers[0].device)
        for cache, dim, staged in self._layer_slices(offset):
            shape = list(cache.shape)
            shape[dim] = self.factor
            data = staged.view(cache.dtype).view(shape).narrow(dim, skip, len(ids)).to(cache.device)
            cache.index_copy_(dim, index, data)

    def transfer_async(self, job_id, spec):
        src, dst = spec
        started = time.monotonic()
        if src.medium() == "GPU" and dst.medium() == MEDIUM:
            n = len(dst.block_hashes)
            ok = self._transfer(dst.block_hashes, self._gpu_ids(src, n), store=True)
        elif src.medium() == MEDIUM and dst.medium() == "GPU":
            n = len(src.block_hashes)
            ok = self._transfer(src.block_hashes, self._gpu_ids(dst, n), store=False)
        else:
            raise ValueError(f"kvtier moves GPU <-> {MEDIUM}, not {src.medium()} -> {dst.medium()}")
        if _RESULT_PAIRS:
            self._finished.append((job_id, ok))
        else:
            self._finished.append(TransferResult(job_id=job_id, success=ok, transfer_size=n * self.block_bytes,
                                                 transfer_time=time.monotonic() - started,
                                                 transfer_type=(src.medium(), dst.medium())))
        return True

    def _transfer(self, block_hashes, gpu_ids, store):
        keys = block_keys(block_hashes, self.scope)
        ok = True
        step = self._slots.count
        for lo in range(0, len(keys), step):
            hi = min(len(keys), lo + step)
            offsets = self._slots.take(hi - lo)
            try:
                if store:
                    for ids, offset in zip(gpu_ids[lo:hi], offsets):
                        self._store(ids, offset)
                    ok &= all(answered(lambda: self.client.batch_set(keys[lo:hi], offsets), [False], "store"))
                else:
                    found = answered(lambda: list(self.client.batch_get(keys[lo:hi], offsets)), [False] * (hi - lo),
                                     "load")
                    for ids, offset, hit in zip(gpu_ids[lo:hi], offsets, found):
                        if hit:
                            self._load(ids, offset)
                    ok &= all(found)
            finally:
                self._slots.give_back(offsets)
        return ok

    def get_finished(self):
        done, self._finished = self._finished, []
        return done

    def wait(self, job_ids):
        """Every transfer finished inside transfer_async: nothing to wait for."""

    def shutdown(self):
        """The client closes with the handler."""


@dataclass
class _Settings:
    endpoint: str
    tenant: str = ""
    token: str = ""
    region_blocks: int = 64
    extra: dict = field(default_factory=dict)


class KvtierOffloadingSpec(OffloadingSpec):
    """vLLM's OffloadingSpec for kvtierd: kv_connector_extra_config names the
    daemon (endpoint, tenant, token), the offloaded block_size in tokens (a
    multiple of the GPU's) and region_blocks (blocks staged per round trip).
    `connect(settings)` makes a client; a test passes its own. vLLM v0.11.0
    constructs it with vllm_config alone, later vLLM with kv_cache_config too
    (one KV cache group: hybrid models' several groups are refused)."""

    def __init__(self, vllm_config, kv_cache_config=None, connect=None):
        self.vllm_config = vllm_config
        self.kv_cache_config = kv_cache_config
        extra = dict(vllm_config.kv_transfer_config.kv_connector_extra_config or {})
        self.extra_config = extra
        self.gpu_block_size = vllm_config.cache_config.block_size
        if kv_cache_config is not None:
            sizes = {g.kv_cache_spec.block_size for g in kv_cache_config.kv_cache_groups}
            if len(kv_cache_config.kv_cache_groups) != 1:
                raise ValueError(f"kvtier offloads one KV cache group; this model has "
                                 f"{len(kv_cache_config.kv_cache_groups)} (block sizes {sorted(sizes)})")
            self.gpu_block_size = sizes.pop()
        self.offloaded_block_size = int(extra.get("block_size", self.gpu_block_size))
        if self.offloaded_block_size % self.gpu_block_size:
            raise ValueError(f"block_size {self.offloaded_block_size} is not a multiple of the GPU's "
                             f"{self.gpu_block_size}")
        # What later vLLM's connector reads off a spec.
        self.hash_block_size = vllm_config.cache_config.block_size
        self.block_size_factors = (self.offloaded_block_size // self.gpu_block_size,)
        parallel = getattr(vllm_config, "parallel_config", None)
        self.tp_size = int(getattr(parallel, "tensor_parallel_size", 1) or 1)
        self.tp_rank = int(getattr(parallel, "rank", 0) or 0)
        self.settings = _Settings(endpoint=extra.get("endpoint", ""), tenant=extra.get("tenant", ""),
                                  token=extra.get("token", ""), region_blocks=int(extra.get("region_blocks", 64)),
                                  extra=extra)
        self._connect = connect or _connect
        self._manager = None

    def get_manager(self):
        if self._manager is None:
            self._manager = KvtierOffloadingManager(self._connect(self.settings), self.tp_size,
                                                    self.offloaded_block_size)
        return self._manager

    def get_handlers(self, kv_caches, attn_backends=None):
        handler = KvtierOffloadingHandler(self._connect(self.settings), kv_caches,
                                          self.offloaded_block_size // self.gpu_block_size, self.tp_rank,
                                          self.tp_size, self.settings.region_blocks)
        yield GPULoadStoreSpec, KvtierLoadStoreSpec, handler
        yield KvtierLoadStoreSpec, GPULoadStoreSpec, handler


def _connect(settings):
    from .client import Client

    return Client(settings.endpoint, tenant=settings.tenant, token=settings.token)
