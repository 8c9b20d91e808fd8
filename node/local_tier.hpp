#pragma once
// A node's own tier: DRAM block slots, runtime/'s block_pool (references,
// LRU free lists) and prefix_index (hash -> slot) over one byte region that
// the remote store reads from and writes into.
//
// Invariants: a slot that a request uses holds a reference until the request
// ends, so eviction never reuses it under a transfer; a slot is indexed only
// once its bytes are whole (computed, or read and verified); every block the
// node holds is also in the remote store (written by a prefill or read from
// it), so released slots join the clean list. Owned by one actor.

#include "io/slot_store.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/prefix_index.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace kvtier::node {

class local_tier {
public:
  local_tier(uint32_t blocks, uint64_t block_bytes);

  io::dram_region region() { return {bytes_.data(), layout_}; }
  std::span<std::byte> bytes(block_id id);

  /// The slot holding `hash`, referenced; invalid_block when the tier lacks it.
  block_id find(const block_hash& hash);
  /// A referenced, unindexed slot (evicting the least recently freed block);
  /// nullopt when every slot is referenced.
  std::optional<block_id> allocate();
  /// The slot's bytes are whole: index it under `hash`.
  void publish(block_id id, const block_hash& hash);
  /// Drops a request's reference.
  void release(block_id id);
  /// Drops the reference of a slot whose bytes are not to be trusted (a failed read).
  void discard(block_id id);

private:
  tier_layout layout_;
  std::vector<std::byte> bytes_;
  block_pool pool_;
  prefix_index index_;
};

} // namespace kvtier::node
