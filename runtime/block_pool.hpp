#pragma once
// Fixed set of block slots of one tier: reference counts, lifecycle state and
// two LRU free lists. Metadata only; the bytes live in the backend's memory.
//
// Free slots sit on one of two lists, each least recently freed first:
//  - clean: slots whose loss costs nothing — unhashed (nothing worth keeping)
//    or hashed with a copy held in a lower tier (the owner says so);
//  - dirty: hashed slots that are the only copy of their block.
// allocate() takes the clean list's head, and the dirty list's head only when
// no clean slot is free: eviction prefers what a lower tier can give back.
//
// Invariants:
//  (1) A slot is either referenced (ref_count > 0) or on exactly one free
//      list, never both.
//  (2) release() puts unhashed slots at the clean list's head (they hold
//      nothing: reuse them first) and hashed slots on the dirty list, unless
//      the caller says the slot is backed (release_backed: the clean list).
//      So allocation takes empty slots first, then blocks a lower tier also
//      holds, in the order they became clean, and the sole copies last.
//  (3) A freed slot keeps its hash ("cached") until allocate() reuses it; the
//      caller learns the evicted hash from the allocation and unindexes it.
//  (4) A slot in state `moving` is pinned by a reference while in flight, so
//      it is never on a free list and can be neither evicted nor reused.
//  (5) No operation allocates heap memory; all are O(1) except
//      release_sequence, which is O(n) in the blocks released, and the
//      first touch of a never-used slot (below), O(1) amortized.
//  (6) A new pool writes nothing per slot: slots that never left the clean
//      list since construction ([fresh_, capacity)) are not linked; one
//      node on the clean list stands for all of them, in order, where the
//      initial list had them. A slot is linked when first touched, with the
//      never-used slots below it, so every order above is unchanged; their
//      metadata is the all-zero bytes of fresh memory (runtime/zeroed_array.hpp).
// Not thread-safe: owned by one actor (the block manager).

#include "runtime/block_hash.hpp"
#include "runtime/zeroed_array.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace kvtier {

enum class block_id : uint32_t {};
inline constexpr block_id invalid_block{std::numeric_limits<uint32_t>::max()};
constexpr uint32_t index_of(block_id id) {
  return static_cast<uint32_t>(id);
}

enum class block_state : uint8_t {
  free,    // on a free list; content (if hashed) still valid for a prefix hit
  writing, // referenced, being filled by prefill or decode
  full,    // referenced, complete and hashed, shareable
  moving,  // referenced by an in-flight copy into this slot
};

struct allocation {
  block_id id;
  block_hash evicted;     // hash the slot held before reuse; empty() if none
  bool sole_copy = false; // the evicted block came off the dirty list: no lower tier held it
};

class block_pool {
public:
  explicit block_pool(uint32_t capacity);

  uint32_t capacity() const { return capacity_; }
  uint32_t free_count() const { return free_count_; }
  uint32_t used_count() const { return capacity_ - free_count_; }
  /// Free slots on the clean list: what allocation can take without losing a sole copy.
  uint32_t clean_count() const { return clean_count_; }

  /// Takes the least recently freed clean slot (else dirty slot); ref_count
  /// 1, state writing. Returns nullopt when every slot is referenced ("no
  /// room" is normal).
  std::optional<allocation> allocate();

  /// Adds a reference. A cached slot on a free list is taken off it (a
  /// prefix hit); its state becomes full.
  void ref(block_id id);

  /// Where a slot freed by release() joins its free list.
  enum class queue_end : uint8_t {
    most_recent,  // the tail: reused last (normal frees)
    least_recent, // the head: reused first
  };

  /// Drops a reference; at zero an unhashed slot joins the clean list's head,
  /// a hashed one the dirty list at `end`. Returns true if the slot became free.
  bool release(block_id id, queue_end end = queue_end::most_recent);
  /// Same, for a slot whose block a lower tier also holds: it joins the clean list.
  bool release_backed(block_id id, queue_end end = queue_end::most_recent);

  /// Releases a sequence's blocks tail first, so the chain's tail is evicted
  /// before its head (heads are the most shared prefixes).
  void release_sequence(std::span<const block_id> blocks);

  /// A free dirty slot gained a copy below: it moves to the clean list's tail.
  void mark_clean(block_id id);
  /// A free clean, hashed slot lost its copy below: it moves to the dirty list's head.
  void mark_dirty(block_id id);
  bool on_dirty_list(block_id id) const { return meta_[index_of(id)].on_queue == dirty_list; }

  /// A free slot moves to its list's least recent end: allocation (and, on
  /// the dirty list, demote-ahead) reaches it first. A cache policy's victim.
  void evict_next(block_id id);

  /// Drops a free slot's hash so it is no longer a cache candidate, and moves
  /// it to the head of the clean list (it holds nothing worth keeping).
  void forget(block_id id);

  /// Starts loading a slot's metadata (a hint for walks over many slots).
  void prefetch(block_id id) const { __builtin_prefetch(&meta_[index_of(id)]); }

  void set_hash(block_id id, const block_hash& hash) { meta_[linked(id)].hash = hash; }
  const block_hash& hash(block_id id) const { return meta_[index_of(id)].hash; }
  uint32_t ref_count(block_id id) const { return meta_[index_of(id)].ref_count; }
  block_state state(block_id id) const { return meta_[index_of(id)].state; }
  void set_state(block_id id, block_state s);

  /// Changes whenever a free list changes (a slot joins, leaves or moves).
  uint64_t queue_version() const { return queue_version_; }

  /// The slot allocate() would take next, or invalid_block.
  block_id peek_lru() const;
  /// The least recently freed dirty slot, or invalid_block.
  block_id first_dirty() const;
  /// The free slot after `id` on its list towards the most recent end, or
  /// invalid_block. REQUIRES: id is free.
  block_id next_free(block_id id) const;
  /// Clean list then dirty list, each from its LRU end; for tests and policies. O(k).
  std::vector<block_id> free_queue_order(uint32_t limit = std::numeric_limits<uint32_t>::max()) const;

  static constexpr size_t metadata_bytes_per_block();

private:
  static constexpr uint8_t clean_list = 1;
  static constexpr uint8_t dirty_list = 2;

  struct meta {
    block_hash hash; // 16 B
    uint32_t prev;   // free-list links (index; capacity_ and capacity_ + 1 are the sentinels)
    uint32_t next;
    uint32_t ref_count;
    block_state state;
    uint8_t on_queue; // 0, clean_list or dirty_list
    uint16_t reserved;
  };
  static_assert(sizeof(meta) == 32, "block metadata must stay at 32 bytes");

  uint32_t sentinel(uint8_t list) const { return list == clean_list ? capacity_ : capacity_ + 1; }
  // The clean-list node standing for the never-used slots [fresh_, capacity_) (6).
  uint32_t fresh_run() const { return capacity_ + 2; }
  bool never_used(uint32_t i) const { return i >= fresh_ && i < capacity_; }
  // Links the never-used slots up to and including `i` where the run node is.
  void link_fresh_through(uint32_t i);
  // Slot `id`'s index, linked first if it was never used.
  uint32_t linked(block_id id) {
    auto i = index_of(id);
    if (never_used(i))
      link_fresh_through(i);
    return i;
  }
  // The slot after the run node on the clean list, or invalid_block.
  block_id after_fresh_run() const;
  void unlink(uint32_t i);
  void push(uint32_t i, uint8_t list, queue_end end);
  bool release_to(block_id id, uint8_t list, queue_end end);

  uint32_t capacity_;
  uint32_t free_count_ = 0;
  uint32_t clean_count_ = 0;
  uint64_t queue_version_ = 0;
  uint32_t fresh_ = 0;      // the first never-used slot (6)
  zeroed_array<meta> meta_; // capacity_ + 3 entries: the slots, the two sentinels, the run node
};

constexpr size_t block_pool::metadata_bytes_per_block() {
  return sizeof(meta);
}

} // namespace kvtier
