#pragma once
// The local tiers as one inclusive stack of caches: HBM above DRAM above
// NVMe. A block may have copies in several tiers; this is where a tier learns
// whether a copy below it exists, and where evictions are judged lost.
//
// Invariants:
//  (1) A disabled tier (capacity 0) has no cache: find() and backed_below()
//      treat it as empty; at() and allocate() REQUIRE an enabled tier.
//  (2) An eviction is counted lost in its tier's metrics exactly when the
//      evicted block was not known to be backed and no other tier, below or
//      above, holds it: the last copy is gone.
//  (3) When a lower tier evicts a block, the nearest tier above that holds
//      it loses its backed bit unless a tier further down still holds it.
//  (4) With a cache policy (not LRU), every enabled tier has one instance of
//      it, and all share one block history (actors/block_history.hpp).

#include "actors/block_history.hpp"
#include "actors/tier_cache.hpp"
#include "runtime/metrics.hpp"
#include "runtime/tier.hpp"

#include <array>
#include <memory>
#include <optional>
#include <span>

namespace kvtier {

inline constexpr std::array<tier, 3> local_tiers{tier::hbm, tier::dram, tier::nvme};

/// Which cache policy orders every tier: nullopt is the free queues' LRU.
struct tier_stack_policy {
  std::optional<cache::policy_kind> kind;
  double window = 0; // share of each tier queued as the policy's victims (demote_watermark)
};

class tier_stack {
public:
  /// `capacities` in blocks per local tier (0 disables it); metrics per tier.
  /// HBM blocks live in the slot of their number (the model's block tables
  /// name them); the tiers below place theirs as `below_hbm` says.
  tier_stack(std::array<uint32_t, 3> capacities, block_metrics& metrics, tier_stack_policy policy = {},
             slot_placement_kind below_hbm = slot_placement_kind::eviction_order);

  /// A request uses `chain`, its first `hit_blocks` found cached: the
  /// policies learn each block's context and the hits (in the highest tier
  /// holding each), last block first as cache/'s tier replay does. Call
  /// before storing the request's new blocks or promotions. Without a
  /// policy, nothing.
  void note_request(std::span<const block_hash> chain, size_t hit_blocks);

  bool enabled(tier t) const { return tiers_[index_of(t)] != nullptr; }
  tier_cache& at(tier t) { return *tiers_[index_of(t)]; }
  const tier_cache& at(tier t) const { return *tiers_[index_of(t)]; }

  /// Allocates a slot in `t`; an evicted block is unindexed, judged lost or
  /// not (2), and unbacks the copies above it (3).
  std::optional<block_id> allocate(tier t);

  /// Where `hash` lives in `t`, or invalid_block (also when `t` is disabled).
  block_id find(tier t, const block_hash& hash) const;
  /// True if some tier below `t` holds `hash`.
  bool backed_below(tier t, const block_hash& hash) const;
  /// True if some tier other than `t` holds `hash`.
  bool held_elsewhere(tier t, const block_hash& hash) const;
  /// The backed bit of slot `id` of `t`, settled by an index lookup below
  /// when it is not set yet.
  bool slot_backed(tier t, block_id id);
  /// Counts an eviction from `t` that a block table made without allocate().
  void count_eviction(tier t, const block_hash& hash, bool maybe_sole);

  /// Starts loading every enabled tier's index bucket for `hash`: the
  /// lookups above miss the cache in large tiers, and walks over many blocks
  /// call this a few blocks ahead. A hint; changes nothing.
  void prefetch(const block_hash& hash) const;

private:
  /// A lower tier `t` dropped `hash`: upper copies may no longer be backed.
  void unback_above(tier t, const block_hash& hash);

  std::array<std::unique_ptr<tier_cache>, 3> tiers_;
  std::unique_ptr<block_history> history_; // with a policy only
};

} // namespace kvtier
