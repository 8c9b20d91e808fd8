"""An in-process stand-in for kvtierd behind the raw client interface
(_kvtier.Client's methods), keeping client.hpp's promises: a block is
block_bytes long, gets write only found blocks, tenants are kept apart, pins
belong to a connection. It lets the adapters' tests run where no daemon is
built; the same tests run against kvtierd where it is."""

from kvtier import Error

KEY = 16


class MemoryDaemon:
    def __init__(self, block_bytes, quota_blocks=None):
        self.block_bytes = block_bytes
        self.quota_blocks = quota_blocks or {}  # tenant -> blocks; absent: no quota
        self.blocks = {}  # (tenant, key) -> bytes
        self.calls = []   # (operation, number of keys), in order
        self.gone = False  # every call fails as on a closed connection

    def connect(self, tenant=""):
        return MemoryConnection(self, tenant)


class MemoryConnection:
    def __init__(self, daemon, tenant):
        self.daemon = daemon
        self.tenant = tenant
        self.region = None
        self.pins = {}

    @property
    def block_bytes(self):
        return self.daemon.block_bytes

    def map_region(self, nbytes):
        self.region = bytearray(-(-nbytes // 4096) * 4096)
        return self.region

    def _keys(self, packed, op):
        if self.daemon.gone:
            raise Error("closed: the daemon is gone")
        assert isinstance(packed, bytes) and len(packed) % KEY == 0, packed
        keys = [packed[i:i + KEY] for i in range(0, len(packed), KEY)]
        assert all(any(k) for k in keys), "the all-zero key is reserved"
        self.daemon.calls.append((op, len(keys)))
        return [(self.tenant, k) for k in keys]

    def _check(self, offsets, n):
        assert len(offsets) == n
        for off in offsets:
            assert 0 <= off and off + self.block_bytes <= len(self.region), off

    def batch_exists(self, packed):
        count = 0
        for k in self._keys(packed, "exists"):
            if k not in self.daemon.blocks:
                break
            count += 1
        return count

    def batch_get(self, packed, offsets):
        keys = self._keys(packed, "get")
        self._check(offsets, len(keys))
        found = []
        for k, off in zip(keys, offsets):
            data = self.daemon.blocks.get(k)
            if data is not None:
                self.region[off:off + self.block_bytes] = data
            found.append(data is not None)
        return found

    def batch_set(self, packed, offsets):
        keys = self._keys(packed, "set")
        self._check(offsets, len(keys))
        quota = self.daemon.quota_blocks.get(self.tenant)
        held = sum(1 for t, _ in self.daemon.blocks if t == self.tenant)
        new = len({k for k in keys if k not in self.daemon.blocks})
        if quota is not None and held + new > quota:
            raise Error(f"quota_exceeded: tenant {self.tenant} holds {held} of {quota} blocks")
        for k, off in zip(keys, offsets):
            self.daemon.blocks.setdefault(k, bytes(self.region[off:off + self.block_bytes]))
        return [True] * len(keys)

    def pin(self, packed):
        keys = [k for k in self._keys(packed, "pin") if k in self.daemon.blocks]
        for k in keys:
            self.pins[k] = self.pins.get(k, 0) + 1
        return len(keys)

    def release(self, packed):
        released = 0
        for k in self._keys(packed, "release"):
            if self.pins.get(k):
                self.pins[k] -= 1
                released += 1
                if not self.pins[k]:
                    del self.pins[k]
        return released

    def stats(self):
        self._keys(b"", "stats")
        mine = sum(1 for t, _ in self.daemon.blocks if t == self.tenant)
        return {"block_bytes": self.block_bytes, "tenant_blocks": mine, "tenant_pinned": len(self.pins)}
