#include "sim/cluster_router.hpp"

#include "runtime/check.hpp"

#include <algorithm>
#include <limits>

namespace kvtier::sim {
namespace {

// Views are tables of megabytes, each lookup a cache miss: the walks over a
// chain load the buckets of the sampled hashes this many samples ahead.
constexpr size_t prefetch_ahead = 4;

} // namespace

cluster_router::cluster_router(router_kind kind, uint32_t load_slack, uint32_t replicas, std::vector<uint32_t> pool,
                               uint32_t view_blocks, uint32_t stride)
    : kind_(kind), stride_(std::max<uint32_t>(1, stride)), load_slack_(load_slack), pool_(std::move(pool)) {
  for (uint32_t r = 0; r < replicas; ++r)
    views_.emplace_back(view_blocks / stride_);
  KVTIER_CHECK(!pool_.empty(), "cluster_router: an empty pool");
  for (auto r : pool_)
    KVTIER_CHECK(r < replicas, "cluster_router: a pool replica out of range");
}

uint32_t cluster_router::route(std::span<const block_hash> chain, std::span<const uint64_t> outstanding) {
  if (kind_ == router_kind::round_robin)
    return pool_[turn_++ % pool_.size()];
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (auto r : pool_)
    least = std::min(least, outstanding[r]);
  uint32_t best = pool_.front();
  uint64_t best_load = std::numeric_limits<uint64_t>::max();
  size_t best_prefix = 0;
  for (auto r : pool_) {
    uint64_t load = outstanding[r];
    if (kind_ == router_kind::least_loaded) {
      if (load < best_load) {
        best = r;
        best_load = load;
      }
      continue;
    }
    if (load > least + load_slack_)
      continue;
    size_t prefix = sampled_prefix(r, chain);
    if (best_load == std::numeric_limits<uint64_t>::max() || prefix > best_prefix ||
        (prefix == best_prefix && load < best_load)) {
      best = r;
      best_load = load;
      best_prefix = prefix;
    }
  }
  return best;
}

size_t cluster_router::sampled_prefix(uint32_t replica, std::span<const block_hash> chain) {
  auto& view = views_[replica];
  size_t held = 0;
  for (size_t i = stride_ - 1; i < chain.size(); i += stride_) {
    if (i + prefetch_ahead * stride_ < chain.size())
      view.prefetch(chain[i + prefetch_ahead * stride_]);
    if (!view.touch(chain[i]))
      break;
    ++held;
  }
  return held;
}

size_t cluster_router::held_prefix(uint32_t replica, std::span<const block_hash> chain) {
  return sampled_prefix(replica, chain) * stride_;
}

void cluster_router::remember(uint32_t replica, std::span<const block_hash> chain) {
  auto& view = views_[replica];
  for (size_t i = stride_ - 1; i < chain.size(); i += stride_) {
    if (i + prefetch_ahead * stride_ < chain.size())
      view.prefetch(chain[i + prefetch_ahead * stride_]);
    view.insert(chain[i]);
  }
}

} // namespace kvtier::sim
