#pragma once
// `kvtier sim --cache-only`: replays a trace's prompt blocks through the same
// block manager and policy, in arrival order, without timing. Every move
// completes at once, and demotions stream as they do when links keep up:
// after each request, demote-ahead runs until it starts nothing more. It
// answers "what hit ratio would these capacities give?" in a fraction of a
// timed run, and agrees with a timed run wherever timing does not bind.

#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "sim/trace.hpp"

#include <nlohmann/json.hpp>

namespace kvtier::sim {

struct cache_only_result {
  block_metrics blocks;
  uint64_t requests = 0;
  uint64_t uncacheable_requests = 0; // larger than HBM: looked up, not stored
  double wall_seconds = 0;

  double hit_ratio() const;
  nlohmann::json to_json() const;
};

/// `hbm_blocks_override` > 0 replaces the config's HBM capacity (in blocks).
cache_only_result run_cache_only(const config& cfg, const trace& t, uint64_t hbm_blocks_override = 0);

} // namespace kvtier::sim
