#pragma once
// The [cluster] table: several replicas of the single-node actor graph on one
// virtual clock, a router in front of them, optional prefill and decode pools,
// and a remote (L4) tier they all share (docs/cluster.md).
//
// Invariants (validate): replicas >= 1; either prefill and decode are both 0
// (every replica serves whole requests) or both >= 1 and prefill + decode ==
// replicas; a remote tier with capacity has a bandwidth.

#include <cstdint>

namespace kvtier {

enum class router_kind : uint8_t { round_robin, least_loaded, cache_aware };

struct cluster_config {
  uint32_t replicas = 1;
  router_kind router = router_kind::round_robin;
  /// cache_aware: a replica holding a longer prefix wins unless it has more
  /// than this many requests outstanding beyond the least loaded replica.
  uint32_t load_slack = 4;
  uint32_t prefill = 0;               // replicas that only prefill (0 with decode = 0: no pools)
  uint32_t decode = 0;                // replicas that only decode
  uint64_t remote_capacity_bytes = 0; // the shared remote tier; 0 = none
  double remote_gbps = 25;            // its bandwidth each way, shared by all replicas
  double remote_latency_us = 50;      // per transfer
  /// Threads that advance the replicas between the router's decisions (0 =
  /// one per core; at most the replicas one step advances: all of them, or
  /// the larger pool). Results do not depend on it.
  uint32_t threads = 0;

  bool disaggregated() const { return prefill > 0; }
  bool active() const { return replicas > 1 || disaggregated() || remote_capacity_bytes > 0; }
};

} // namespace kvtier
