"""kvtier.Client: a connection to kvtierd, the node-local KV block store.

Block bytes never cross the socket: map_region() creates a shared-memory
region that this process and the daemon both map, and gets and sets name
blocks by where they lie in it. numpy() and torch() are zero-copy views of
that region, so an engine can keep its host KV pool there and have the daemon
fill it directly; every batch call takes, per block, either an offset into
the region or a numpy array / torch tensor that is a view of it.

Blocks are named by 16-byte keys (kvtier.block_key); any other name
(str, bytes, int) is hashed to one. A client may be shared by threads: its
calls take turns on the one connection (each is one request and its reply);
threads that should not wait for each other open a client each.
"""

import threading

import numpy as np

from . import _kvtier
from .keys import block_keys


def _raw_client(endpoint, tenant, token, timeout_ms):
    raw = getattr(_kvtier, "Client", None)
    if raw is None:
        raise _kvtier.Error("this build of kvtier has no client library (kvtierd's client was not built)")
    return raw(endpoint, tenant, token, timeout_ms)


class Client:
    def __init__(self, endpoint, tenant="", token="", timeout_ms=10_000, *, _raw=None):
        """Connects to kvtierd at endpoint ("/run/kvtierd.sock", "unix:/path",
        "tcp:127.0.0.1:7070") as tenant with token; raises kvtier.Error when refused."""
        self._raw = _raw if _raw is not None else _raw_client(endpoint, tenant, token, timeout_ms)
        self._region = None
        self._turn = threading.Lock()  # the connection serves one request at a time

    @property
    def block_bytes(self):
        """Bytes per block, as the daemon is configured."""
        return self._raw.block_bytes

    # --- the shared-memory region -------------------------------------------------------

    def map_region(self, nbytes):
        """Creates and maps the region (rounded up to the page size) and has the
        daemon map it; a second call replaces the first. Returns a writable memoryview."""
        with self._turn:
            self._region = memoryview(self._raw.map_region(int(nbytes)))
        return self._region

    @property
    def region(self):
        """The mapped region as a writable memoryview, or None."""
        return self._region

    def _mapped(self):
        if self._region is None:
            raise _kvtier.Error("no region is mapped: call map_region(bytes) first")
        return self._region

    def numpy(self, dtype=np.uint8, blocks=False):
        """The region as a numpy array (a view: writes reach the daemon's reads).
        blocks=True: shaped (region blocks, block elements)."""
        array = np.frombuffer(self._mapped(), dtype=dtype)
        return array.reshape(-1, self.block_bytes // array.itemsize) if blocks else array

    def torch(self, dtype=None, blocks=False):
        """The region as a torch tensor (a view, like numpy())."""
        import torch

        tensor = torch.frombuffer(self._mapped(), dtype=dtype or torch.uint8)
        return tensor.view(-1, self.block_bytes // tensor.element_size()) if blocks else tensor

    def offset_of(self, where):
        """A block's offset in the region: an int as is, or a numpy array /
        torch tensor that views exactly one block of the region."""
        if isinstance(where, (int, np.integer)):
            return int(where)
        region = self._mapped()
        base = np.frombuffer(region, dtype=np.uint8).__array_interface__["data"][0]
        if isinstance(where, np.ndarray):
            address, nbytes, contiguous = where.__array_interface__["data"][0], where.nbytes, where.flags.c_contiguous
        elif hasattr(where, "data_ptr"):
            address, nbytes = where.data_ptr(), where.numel() * where.element_size()
            contiguous = where.is_contiguous()
        else:
            raise TypeError(f"a block is an offset, a numpy array or a torch tensor, got {type(where).__name__}")
        offset = address - base
        if not contiguous or nbytes != self.block_bytes or not 0 <= offset <= len(region) - nbytes:
            raise ValueError(f"a block view must be one contiguous block of {self.block_bytes} bytes inside the "
                             f"region; got {nbytes} bytes at offset {offset} (region {len(region)} bytes)")
        return offset

    # --- blocks ---------------------------------------------------------------------------

    @staticmethod
    def _packed(names):
        return b"".join(block_keys(names))

    def batch_exists(self, names):
        """How many of the blocks, from the first, the daemon holds (stops at the first miss)."""
        keys = self._packed(names)
        with self._turn:
            return self._raw.batch_exists(keys)

    def batch_get(self, names, blocks):
        """Copies each found block into the region where blocks[i] says; a list
        of bools, True for each block found (the others are left as they were)."""
        offsets = [self.offset_of(b) for b in blocks]
        if len(offsets) != len(names):
            raise ValueError(f"{len(names)} names and {len(offsets)} blocks")
        keys = self._packed(names)
        with self._turn:
            return list(self._raw.batch_get(keys, offsets))

    def batch_set(self, names, blocks):
        """Stores each block of the region that blocks[i] names under names[i];
        True for each block the daemon holds now. Raises kvtier.Error (nothing
        stored) when the tenant's quota would be exceeded."""
        offsets = [self.offset_of(b) for b in blocks]
        if len(offsets) != len(names):
            raise ValueError(f"{len(names)} names and {len(offsets)} blocks")
        keys = self._packed(names)
        with self._turn:
            return list(self._raw.batch_set(keys, offsets))

    def pin(self, names):
        """Pins the blocks the daemon holds against eviction until release() or
        this connection ends; returns how many were pinned."""
        keys = self._packed(names)
        with self._turn:
            return self._raw.pin(keys)

    def release(self, names):
        """Ends this connection's pins on the blocks; returns how many it released."""
        keys = self._packed(names)
        with self._turn:
            return self._raw.release(keys)

    def stats(self):
        """The daemon's and this tenant's counters, as a dict."""
        with self._turn:
            return dict(self._raw.stats())
