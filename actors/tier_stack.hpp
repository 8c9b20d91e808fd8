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

#include "actors/tier_cache.hpp"
#include "runtime/metrics.hpp"
#include "runtime/tier.hpp"

#include <array>
#include <memory>
#include <optional>

namespace kvtier {

inline constexpr std::array<tier, 3> local_tiers{tier::hbm, tier::dram, tier::nvme};

class tier_stack {
public:
  /// `capacities` in blocks per local tier (0 disables it); metrics per tier.
  /// HBM blocks live in the slot of their number (the model's block tables
  /// name them); the tiers below place theirs as `below_hbm` says.
  tier_stack(std::array<uint32_t, 3> capacities, block_metrics& metrics,
             slot_placement_kind below_hbm = slot_placement_kind::eviction_order);

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
};

} // namespace kvtier
