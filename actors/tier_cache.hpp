#pragma once
// One tier's block cache: its pool of slots, the prefix index over them, one
// "backed" bit per slot and the counted allocate/free that keeps the tier's
// metrics. Knows nothing of other tiers: whether a copy below exists is the
// tier_stack's question (actors/tier_stack.hpp).
//
// Invariants:
//  (1) Every slot taken off the free queue is counted in `allocated`, every
//      slot returned to it in `freed`; at rest allocated == freed + used.
//      Operations that move slots through a block_table instead of through
//      allocate()/free() count them with count_taken()/count_released().
//  (2) The index maps a hash to the one slot of this tier that holds it;
//      index_as() and uncache() keep slot hash and index entry together, and
//      allocate() unindexes the block it evicts.
//  (3) A backed bit of 1 says a lower tier held the slot's block when it was
//      set; it is cleared when the slot is reused. A freed hashed slot joins
//      the pool's clean list when its bit is set and the dirty list when not;
//      an unhashed one always goes clean (runtime/block_pool.hpp).
//  (4) With a policy (use_policy(); none under LRU), every block indexed
//      here is offered to it and every block unindexed is dropped from it,
//      and the free queue's least recent end holds its victims
//      (actors/tier_policy.hpp); without one, nothing here consults it.
//  (5) A block's bytes live in the slot its placement gives it
//      (runtime/slot_placement.hpp): a block taken by allocate() has none
//      until place() gives it one, which the block manager does for a batch's
//      destinations before the batch leaves; a block that becomes free
//      holding nothing, or is taken again, gives its slot back. Copies and
//      page I/O address slots (slot_of()); everything else here addresses
//      blocks.
// Not thread-safe: owned by the block manager.

#include "actors/tier_policy.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/metrics.hpp"
#include "runtime/prefix_index.hpp"
#include "runtime/slot_placement.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace kvtier {

class tier_cache {
public:
  tier_cache(uint32_t capacity, tier_metrics& metrics,
             slot_placement_kind placement = slot_placement_kind::eviction_order);

  /// Eviction and admission follow `kind` from now on (actors/tier_policy.hpp).
  void use_policy(cache::policy_kind kind, double window, block_history& history);
  const tier_policy* policy() const { return policy_.get(); }

  struct taken {
    block_id id;
    block_hash evicted;              // the cached block the slot held; empty() if none
    bool evicted_maybe_sole = false; // the evicted slot was dirty or not known to be backed
  };

  /// Takes a slot off the free queue, evicting (and unindexing) what it held.
  /// nullopt, counted as an allocation failure, when every slot is referenced.
  std::optional<taken> allocate();

  /// Returns a reference; the last one puts the slot back on the free queue
  /// (clean list when backed and hashed, dirty list otherwise) and counts it.
  void free(block_id id, block_pool::queue_end end = block_pool::queue_end::most_recent);

  /// A free block's content is no longer wanted: unhashed, first in line for
  /// reuse (block_pool::forget), and its slot free. REQUIRES: unindexed.
  void forget(block_id id);

  /// Takes a reference on a slot found through the index. Returns true, and
  /// counts the slot as allocated, when that revived it from the free queue.
  bool pin(block_id id);

  /// Slots a block_table took from (or gave back to) the pool directly.
  void count_taken(uint64_t n) { allocated_ += n; }
  void count_released(uint64_t n) { freed_ += n; }

  /// Records the pool's current use in the peak.
  void note_usage();

  block_id find(const block_hash& hash) const { return index_.find(hash); }
  /// Starts loading the index bucket a find(hash) reads first (a hint).
  void prefetch(const block_hash& hash) const { index_.prefetch(hash); }
  /// Gives slot `id` the hash `hash` and indexes it there.
  void index_as(block_id id, const block_hash& hash);
  /// Drops an evicted hash from the index (the slot was reused already).
  void unindex(const block_hash& hash);
  /// A request found slot `id`'s block here (a prefix hit).
  void used(block_id id);
  /// Up to `n` slots will be taken off the free queue directly (a block
  /// table's append): the policy's victims go first.
  void make_room(uint32_t n);
  /// The slot's content is invalid: unindexed (if the index points at it) and unhashed.
  void uncache(block_id id);
  /// Slot `slot` is known to hold block `hash` (found again after a restart):
  /// block number `slot` becomes a cached free block there, indexed, at the
  /// most recent end of the free queue, not counted as allocated or freed.
  /// False, changing nothing, when `slot` is out of range, taken, or its
  /// block is referenced or holds a block, or `hash` is empty or indexed already.
  bool adopt(uint32_t slot, const block_hash& hash);

  /// Gives the unplaced blocks of `ids` slots, in order (4).
  void place(std::span<const block_id> ids) { placement_.place(ids); }
  /// The slot holding block `id`'s bytes. REQUIRES: placed.
  uint32_t slot_of(block_id id) const { return placement_.slot_of(id); }
  const slot_placement& placement() const { return placement_; }

  bool backed(block_id id) const { return backed_[index_of(id)] != 0; }
  void set_backed(block_id id, bool backed) { backed_[index_of(id)] = backed ? 1 : 0; }

  block_pool& pool() { return pool_; }
  const block_pool& pool() const { return pool_; }
  tier_metrics& metrics() { return metrics_; }
  uint64_t allocated() const { return allocated_; }
  uint64_t freed() const { return freed_; }

private:
  block_pool pool_;
  slot_placement placement_;
  prefix_index index_;
  std::vector<uint8_t> backed_;
  std::unique_ptr<tier_policy> policy_;
  tier_metrics& metrics_;
  uint64_t& allocated_; // metrics_.allocated
  uint64_t& freed_;     // metrics_.freed
};

} // namespace kvtier
