#pragma once
// Fixed set of block slots of one tier: reference counts, lifecycle state and
// an LRU free queue. Metadata only; the bytes live in the backend's memory.
//
// Invariants:
//  (1) A slot is either referenced (ref_count > 0) or on the free queue, never both.
//  (2) The free queue is ordered least recently freed first; allocate() takes
//      the head, release() appends at the tail.
//  (3) A freed slot keeps its hash ("cached") until allocate() reuses it; the
//      caller learns the evicted hash from the allocation and unindexes it.
//  (4) A slot in state `moving` is pinned by a reference while in flight, so
//      it is never on the free queue and can be neither evicted nor reused.
//  (5) No operation allocates heap memory; all are O(1) except
//      release_sequence, which is O(n) in the blocks released.
// Not thread-safe: owned by one actor (the block manager).

#include "runtime/block_hash.hpp"

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

namespace kvtier {

enum class block_id : uint32_t {};
inline constexpr block_id invalid_block{std::numeric_limits<uint32_t>::max()};
constexpr uint32_t index_of(block_id id) { return static_cast<uint32_t>(id); }

enum class block_state : uint8_t {
  free,    // on the free queue; content (if hashed) still valid for a prefix hit
  writing, // referenced, being filled by prefill or decode
  full,    // referenced, complete and hashed, shareable
  moving,  // referenced by an in-flight copy into or out of this slot
};

struct allocation {
  block_id id;
  block_hash evicted; // hash the slot held before reuse; empty() if none
};

class block_pool {
public:
  explicit block_pool(uint32_t capacity);

  uint32_t capacity() const { return capacity_; }
  uint32_t free_count() const { return free_count_; }
  uint32_t used_count() const { return capacity_ - free_count_; }

  /// Takes the least recently freed slot, ref_count 1, state writing.
  /// Returns nullopt when every slot is referenced ("no room" is normal).
  std::optional<allocation> allocate();

  /// Adds a reference. A cached slot on the free queue is taken off it
  /// (a prefix hit); its state becomes full.
  void ref(block_id id);

  /// Where a slot freed by release() joins the free queue.
  enum class queue_end : uint8_t {
    most_recent,  // the tail: evicted last (normal frees)
    least_recent, // the head: evicted first (clean copies already held below)
  };

  /// Drops a reference; at zero the slot joins the free queue at `end`.
  /// Returns true if the slot became free.
  bool release(block_id id, queue_end end = queue_end::most_recent);

  /// Releases a sequence's blocks tail first, so the chain's tail is evicted
  /// before its head (heads are the most shared prefixes).
  void release_sequence(std::span<const block_id> blocks);

  /// Drops a free slot's hash so it is no longer a cache candidate, and moves
  /// it to the head of the free queue (it holds nothing worth keeping).
  void forget(block_id id);

  void set_hash(block_id id, const block_hash& hash) { meta_[index_of(id)].hash = hash; }
  const block_hash& hash(block_id id) const { return meta_[index_of(id)].hash; }
  uint32_t ref_count(block_id id) const { return meta_[index_of(id)].ref_count; }
  block_state state(block_id id) const { return meta_[index_of(id)].state; }
  void set_state(block_id id, block_state s);

  /// Changes whenever the free queue changes (a slot joins or leaves it).
  uint64_t queue_version() const { return queue_version_; }

  /// The slot allocate() would take next, or invalid_block.
  block_id peek_lru() const;
  /// The free slot after `id` towards the most recent end, or invalid_block.
  /// REQUIRES: id is on the free queue.
  block_id next_free(block_id id) const;
  /// Free-queue walk from the LRU end; for tests and policies. O(k).
  std::vector<block_id> free_queue_order(uint32_t limit = std::numeric_limits<uint32_t>::max()) const;

  static constexpr size_t metadata_bytes_per_block();

private:
  struct meta {
    block_hash hash;     // 16 B
    uint32_t prev;       // free-queue links (index; capacity_ is the sentinel)
    uint32_t next;
    uint32_t ref_count;
    block_state state;
    uint8_t on_queue;
    uint16_t reserved;
  };
  static_assert(sizeof(meta) == 32, "block metadata must stay at 32 bytes");

  void unlink(uint32_t i);
  void push_back(uint32_t i);
  void push_front(uint32_t i);

  uint32_t capacity_;
  uint32_t free_count_ = 0;
  uint64_t queue_version_ = 0;
  std::vector<meta> meta_; // capacity_ + 1 entries; the last is the sentinel
};

constexpr size_t block_pool::metadata_bytes_per_block() {
  return sizeof(meta);
}

} // namespace kvtier
