#pragma once
// One tier's eviction and admission order from a cache/ policy (ARC, S3-FIFO,
// LFU-DA, the reuse predictor): the policy decides which cached block leaves
// and whether a block is stored at all; the tier's free queue carries the
// decision out. The policy objects are cache/'s, the same ones cache/'s tier
// replay runs; LRU needs none (the free queue is LRU by itself).
//
// The policy holds the tier's cached blocks, referenced or free, at a
// capacity of the tier's less its demote window (`window` share, as
// demote_watermark): what it evicts beyond that is the window, queued at the
// free queue's least recent end, where demote-ahead copies blocks down and
// allocation takes them first. A block the policy evicted ("chosen") or did
// not admit goes to that end when it is freed, or at once when it is free.
// Before slots are taken, make_room() asks the policy for victims until that
// many free slots at the allocation end are empty or chosen, so an
// allocation never evicts a block the policy still keeps, unless every
// victim it names is in use.
//
// Invariants:
//  (1) The policy holds only blocks indexed in this tier (dropped() on every
//      unindex), each at most once; size() <= its capacity.
//  (2) A slot is chosen exactly when its block left the policy (evicted or
//      refused) while the slot still holds it; accessed() clears it.
//  (3) Deterministic: the same calls give the same free-queue order.
// Not thread-safe: owned by the tier's cache.

#include "actors/block_history.hpp"
#include "cache/policy.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/config.hpp"
#include "runtime/prefix_index.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace kvtier {

/// The cache/ policy that orders the block manager's tiers, or nullopt for
/// LRU (the free queues' own order; also the oracle's, which is a bound).
std::optional<cache::policy_kind> tier_policy_kind(eviction_policy policy);

struct tier_policy_counts {
  uint64_t chosen = 0;  // blocks the policy evicted while the tier held them
  uint64_t refused = 0; // blocks the policy did not admit
};

class tier_policy {
public:
  tier_policy(cache::policy_kind kind, uint32_t capacity, double window, block_pool& pool, const prefix_index& index,
              block_history& history);

  /// Slot `id` holds `hash` and the tier stores it (a new block, a copy that
  /// arrived) or a request used it here: a hit, or an insert when the policy
  /// does not hold it.
  void accessed(block_id id, const block_hash& hash);
  /// `hash` left the tier (evicted, moved, invalid).
  void dropped(const block_hash& hash);
  /// Slot `id` was taken for new content.
  void reused(block_id id) { chosen_[index_of(id)] = 0; }
  /// Up to `n` allocations follow: victims first.
  void make_room(uint32_t n);
  /// Where a freed slot joins its list: chosen ones at the least recent end.
  block_pool::queue_end release_end(block_id id, block_pool::queue_end asked) const {
    return chosen_[index_of(id)] ? block_pool::queue_end::least_recent : asked;
  }

  const tier_policy_counts& counts() const { return counts_; }
  const cache::cache_policy& policy() const { return *policy_; }

private:
  /// The policy evicted `key`: its slot goes first. True when the slot is free.
  bool evicted(cache::block_key key);
  block_id next_to_allocate(block_id id) const;

  std::unique_ptr<cache::cache_policy> policy_;
  block_pool& pool_;
  const prefix_index& index_;
  block_history& history_;
  std::vector<uint8_t> chosen_;
  tier_policy_counts counts_;
};

} // namespace kvtier
