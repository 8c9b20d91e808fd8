#pragma once
// The cluster's router: which replica of a pool serves a request.
//
//  - round_robin: the pool's replicas in turn.
//  - least_loaded: the replica with the fewest requests outstanding (routed
//    and not yet settled); ties go to the lowest index.
//  - cache_aware: prefix affinity balanced against load. The router keeps a
//    view of what each replica holds: the chains it sent there, least
//    recently used out first, as many blocks as the replica's local tiers
//    hold. Replicas whose load is within `load_slack` of the least loaded one
//    are candidates; the candidate holding the longest prefix of the request
//    wins; ties go to the lower load, then the lower index. So affinity wins
//    until it would queue a request more than `load_slack` requests deeper
//    than it need be (docs/cluster.md).
//
// A view samples each chain: it keeps the hash of every `stride`-th block
// (blocks stride-1, 2*stride-1, ...; a chained hash names its whole prefix),
// so a prefix is known to within stride - 1 blocks at 1/stride of the cost.
// Every router keeps the views (the remote tier asks them what a replica
// lacks). Plain C++, no actors, no clock: deterministic by construction.

#include "runtime/block_hash.hpp"
#include "runtime/cluster_config.hpp"
#include "sim/cluster_lru.hpp"

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace kvtier::sim {

class cluster_router {
public:
  /// `replicas` views of `view_blocks` blocks each (sampled every `stride`
  /// blocks); `pool` the replica indices this router chooses among (in order).
  cluster_router(router_kind kind, uint32_t load_slack, uint32_t replicas, std::vector<uint32_t> pool,
                 uint32_t view_blocks, uint32_t stride = 1);

  /// The replica for a request with `chain`, given every replica's
  /// outstanding requests (indexed by replica).
  uint32_t route(std::span<const block_hash> chain, std::span<const uint64_t> outstanding);

  /// Leading blocks of `chain` the view of `replica` holds, a multiple of
  /// the stride (refreshes them).
  size_t held_prefix(uint32_t replica, std::span<const block_hash> chain);
  /// The replica now holds `chain`.
  void remember(uint32_t replica, std::span<const block_hash> chain);

private:
  size_t sampled_prefix(uint32_t replica, std::span<const block_hash> chain);

  router_kind kind_;
  uint32_t stride_;
  uint32_t load_slack_;
  std::vector<uint32_t> pool_;
  std::deque<hash_lru> views_; // by replica; a deque: a view never moves
  uint64_t turn_ = 0;
};

} // namespace kvtier::sim
