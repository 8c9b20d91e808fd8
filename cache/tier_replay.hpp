#pragma once
// Replays requests' block chains through a stack of per-tier policies (HBM,
// DRAM, NVMe), without slots or timing: the policy question alone, in
// seconds, for every policy and hierarchy on the same footing.
//
// Per request: the leading run of blocks found in some tier is the prefix
// hit (counted in the highest tier holding each block); then every block of
// the chain is used in HBM, in chain order:
//  - found in HBM: a hit there;
//  - found below: promoted to HBM; inclusive keeps the copy below (touched
//    as a hit), exclusive frees it;
//  - found nowhere: stored in HBM.
// Storing a block in a full tier evicts one there. Exclusive: the victim
// moves to the next tier down (a demotion), the last tier's victim is lost.
// Inclusive: the victim moves down only if the next tier holds no copy.
// A tier whose policy does not admit a block passes it to the next one down;
// a block no tier admits is not kept.
//
// Invariants: exclusive — a block is resident in at most one tier after
// every request; every counter below counts block moves the real block
// manager would perform (promotions read below and write HBM; demotions
// write below).

#include "cache/policy.hpp"

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::cache {

enum class hierarchy_kind : uint8_t { inclusive, exclusive };

struct replay_tier_counts {
  uint64_t capacity = 0;
  uint64_t hits = 0;       // prefix-hit blocks found first in this tier
  uint64_t evictions = 0;  // blocks this tier's policy pushed out
  uint64_t lost = 0;       // ... that no lower tier kept
  uint64_t promotions = 0; // blocks copied from this tier up to HBM
  uint64_t demotions = 0;  // blocks this tier received from above
  uint64_t refused = 0;    // blocks this tier's policy did not admit
  uint64_t peak_resident = 0;
};

struct replay_result {
  uint64_t requests = 0;
  uint64_t blocks = 0; // prompt blocks looked up
  // Copies beyond the first of each request's blocks, counted after the
  // request: 0 in an exclusive hierarchy.
  uint64_t extra_copies = 0;
  std::array<replay_tier_counts, 3> tiers{};
  uint64_t hit_blocks() const { return tiers[0].hits + tiers[1].hits + tiers[2].hits; }
  double hit_ratio() const { return blocks ? double(hit_blocks()) / double(blocks) : 0.0; }
  /// Hits in tiers 0..t, over all lookups: what memory up to tier t served.
  double hit_ratio_through(size_t t) const;
};

/// `chains`: each request's blocks as dense keys below `key_count`.
/// `capacities`: blocks per tier, 0 for a tier that is not there.
replay_result replay_tiers(std::span<const std::vector<block_key>> chains, uint64_t key_count,
                           std::array<uint64_t, 3> capacities, policy_kind policy, hierarchy_kind hierarchy);

} // namespace kvtier::cache
