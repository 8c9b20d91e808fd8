#pragma once
// Where a cache policy stands, for `kvtier sim --cache-only`: its prefix hit
// ratio through each tier (HBM; HBM+DRAM; all), LRU's in the same hierarchy,
// Belady's bound for the same memory, and the share of the LRU -> Belady gap
// the policy closes. Runs the trace through cache/'s tier replay: policies
// and hierarchies on the same footing, without slots or timing.

#include "cache/policy.hpp"
#include "cache/tier_replay.hpp"
#include "runtime/config.hpp"
#include "sim/trace.hpp"

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::sim {

/// A trace's chains at `block_tokens`, each block hash as a dense key.
struct dense_chains {
  std::vector<std::vector<cache::block_key>> chains;
  uint64_t keys = 0;
};
dense_chains dense_chains_of(const trace& t, uint32_t block_tokens);

/// REQUIRES: policy is not eviction_policy::oracle.
cache::policy_kind policy_kind_of(eviction_policy policy);
cache::hierarchy_kind hierarchy_kind_of(cache_hierarchy hierarchy);

struct tier_standing {
  uint64_t capacity_through = 0; // blocks in this tier and every tier above it
  double hit_ratio = 0;          // hits in this tier or above, over all lookups
  double lru_hit_ratio = 0;
  double belady_hit_ratio = 0;
  std::optional<double> gap_closed; // cache/gap.hpp
};

struct policy_standing {
  cache::policy_kind policy = cache::policy_kind::lru;
  cache::hierarchy_kind hierarchy = cache::hierarchy_kind::inclusive;
  cache::replay_result replay;
  std::array<std::optional<tier_standing>, 3> through; // nullopt for a tier that is not there
};

/// `capacities`: blocks of HBM, DRAM, NVMe (0: not there).
policy_standing measure_policy(const dense_chains& chains, std::array<uint64_t, 3> capacities,
                               cache::policy_kind policy, cache::hierarchy_kind hierarchy);

/// The block manager evicts by LRU: its own prefix hits (per tier, of
/// `prompt_blocks` looked up) replace the replay's and stand for LRU, so the
/// gap it closes is 0 and what remains is its distance to Belady.
void stand_for_lru(policy_standing& standing, const std::array<uint64_t, 3>& prefix_hit_blocks, uint64_t prompt_blocks);

/// A timed run's prefix hits (per tier) of `prompt_blocks` looked up.
struct timed_hits {
  std::array<uint64_t, 3> by_tier{};
  uint64_t prompt_blocks = 0;
};

/// Where the LRU figures of a timed run's standing come from.
enum class lru_source : uint8_t {
  this_run, // the run is LRU: its own hits
  twin,     // the LRU run of the same config
  replay,   // cache/'s tier replay of the trace under LRU (no twin was run)
};

/// A timed run's own hits replace the replay's policy figures; LRU's come
/// from `lru` (its twin's hits) when given, else from the run itself when
/// it is LRU, else stay the replay's. Returns where they came from.
lru_source stand_timed(policy_standing& standing, const timed_hits& run, const std::optional<timed_hits>& lru);

/// One line per tier: hit ratio / LRU / Belady for the same memory / gap closed.
std::string standing_lines(const policy_standing& standing);

nlohmann::json to_json(const policy_standing& standing);

} // namespace kvtier::sim
