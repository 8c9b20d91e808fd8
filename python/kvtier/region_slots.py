"""RegionSlots: block-sized slots of a client's shared-memory region.

Gets and sets move blocks between the daemon and the region at offsets; the
adapters stage blocks there on their way to or from the engine's memory. The
slots are the region cut into block_bytes pieces.

Invariants: every offset handed out is a multiple of block_bytes, and
offset + block_bytes <= the region's size; an offset is handed out again only
after it was given back. Thread-safe: an engine's threads (SGLang's prefetch
and write-back threads) share one adapter, and a take() that finds too few
slots free waits until other threads give theirs back.
"""

import threading


class RegionFull(Exception):
    """More blocks asked for at once than the region has slots."""


class RegionSlots:
    def __init__(self, region_bytes, block_bytes):
        if block_bytes <= 0:
            raise ValueError(f"block_bytes must be positive, got {block_bytes}")
        self.block_bytes = block_bytes
        self.count = region_bytes // block_bytes
        # Lowest offsets first, so a small batch stays in few pages.
        self._free = [i * block_bytes for i in reversed(range(self.count))]
        self._changed = threading.Condition()

    @property
    def free(self):
        with self._changed:
            return len(self._free)

    def take(self, n):
        """n offsets, waiting while fewer are free; RegionFull when n exceeds the region's slots."""
        if n > self.count:
            raise RegionFull(f"{n} blocks asked for at once, the region has {self.count} slots")
        with self._changed:
            self._changed.wait_for(lambda: len(self._free) >= n)
            taken = self._free[len(self._free) - n:]
            del self._free[len(self._free) - n:]
        return list(reversed(taken))

    def give_back(self, offsets):
        for off in offsets:
            if off % self.block_bytes or not 0 <= off < self.count * self.block_bytes:
                raise ValueError(f"offset {off} is not a slot of this region")
        with self._changed:
            self._free.extend(reversed(offsets))
            self._changed.notify_all()
