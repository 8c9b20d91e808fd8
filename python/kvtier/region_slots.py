"""RegionSlots: block-sized slots of a client's shared-memory region.

Gets and sets move blocks between the daemon and the region at offsets; the
adapters stage blocks there on their way to or from the engine's memory. The
slots are the region cut into block_bytes pieces.

Invariants: every offset handed out is a multiple of block_bytes, and
offset + block_bytes <= the region's size; an offset is handed out again only
after it was given back.
"""


class RegionFull(Exception):
    """More blocks in flight than the region has slots."""


class RegionSlots:
    def __init__(self, region_bytes, block_bytes):
        if block_bytes <= 0:
            raise ValueError(f"block_bytes must be positive, got {block_bytes}")
        self.block_bytes = block_bytes
        self.count = region_bytes // block_bytes
        # Lowest offsets first, so a small batch stays in few pages.
        self._free = [i * block_bytes for i in reversed(range(self.count))]

    @property
    def free(self):
        return len(self._free)

    def take(self, n):
        """n offsets, or RegionFull (taking none) when fewer are free."""
        if n > len(self._free):
            raise RegionFull(f"{n} blocks asked for, {len(self._free)} of {self.count} region slots free")
        taken = self._free[-n:] if n else []
        del self._free[len(self._free) - n:]
        return list(reversed(taken))

    def give_back(self, offsets):
        for off in offsets:
            if off % self.block_bytes or not 0 <= off < self.count * self.block_bytes:
                raise ValueError(f"offset {off} is not a slot of this region")
        self._free.extend(reversed(offsets))
