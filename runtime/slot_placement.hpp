#pragma once
// Where the blocks of one tier keep their bytes. A block (an entry of the
// tier's block_pool: what eviction chooses) and a slot (a place in the tier's
// memory: what a copy addresses) are two things, so that which block is
// evicted and where a new block lands are decided apart.
//
// Two placements:
//  - eviction_order: block i lives in slot i, so a new block lands where the
//    block it evicted lived, in whatever order the free list hands them out;
//  - contiguous: a block takes a slot only when its bytes are about to be
//    written, all blocks of one batch at once, from the free slots kept as
//    extents (free_extents: a log that runs downwards, so the slots that
//    evictions free for a batch are few runs), ascending in the batch's
//    order; it gives the slot back when the pool reuses the block or when it
//    becomes free holding nothing.
//
// Invariants:
//  (1) A slot holds at most one block; a placed block has exactly one slot,
//      and block_in(slot_of(b)) == b.
//  (2) Slots held + free slots == capacity, so blocks that need a slot always
//      find one: each holds at most one and there are as many slots as blocks.
//  (3) eviction_order: every block is placed, in the slot of its own number;
//      place() and release() change nothing.
// Not thread-safe: owned by one tier's cache (actors/tier_cache.hpp).

#include "runtime/block_pool.hpp"
#include "runtime/free_extents.hpp"
#include "runtime/zeroed_array.hpp"

#include <cstdint>
#include <optional>
#include <span>

namespace kvtier {

enum class slot_placement_kind : uint8_t { eviction_order, contiguous };

class slot_placement {
public:
  slot_placement(uint32_t capacity, slot_placement_kind kind);

  slot_placement_kind kind() const { return kind_; }
  bool placed(block_id b) const;
  /// REQUIRES: placed(b).
  uint32_t slot_of(block_id b) const;
  /// The block in `slot`, or invalid_block.
  block_id block_in(uint32_t slot) const;

  /// Gives each unplaced block of `blocks` a slot, in order (contiguous).
  void place(std::span<const block_id> blocks);
  /// Places `b` in the given slot (a block found there after a restart);
  /// false, changing nothing, when `b` is placed elsewhere or the slot is taken.
  bool place_at(block_id b, uint32_t slot);
  /// The block's bytes are no longer wanted: its slot is free again (contiguous).
  void release(block_id b);

  /// Free slots as extents (contiguous; empty for eviction_order).
  const free_extents& free_slots() const { return free_; }

private:
  static constexpr uint32_t unplaced = UINT32_MAX;
  // The maps hold a value + 1, so a new map's zero-filled memory reads
  // "unplaced" everywhere without being written (runtime/zeroed_array.hpp).
  static uint32_t get(const zeroed_array<uint32_t>& map, uint32_t i) { return map[i] - 1; }
  static void set(zeroed_array<uint32_t>& map, uint32_t i, uint32_t value) { map[i] = value + 1; }

  slot_placement_kind kind_;
  free_extents free_;
  zeroed_array<uint32_t> slot_of_;  // per block; empty for eviction_order
  zeroed_array<uint32_t> block_in_; // per slot; empty for eviction_order
};

} // namespace kvtier
