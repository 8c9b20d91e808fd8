#pragma once
// Belady's bound over dense chains: the prefix hit ratio of evicting the
// block whose next use lies furthest ahead (blocks never used again first),
// over one pool of `capacity` blocks, knowing every future request. No
// online policy reaches more with that much memory in one tier, and an
// exclusive hierarchy of the same total memory is at best that pool.
// sim/oracle_bound.hpp computes the same over a trace's hashes.

#include "cache/policy.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::cache {

struct belady_result {
  uint64_t blocks = 0;
  uint64_t hit_blocks = 0;
  double hit_ratio() const { return blocks ? double(hit_blocks) / double(blocks) : 0.0; }
};

belady_result belady_prefix_hits(std::span<const std::vector<block_key>> chains, uint64_t key_count, uint64_t capacity);

} // namespace kvtier::cache
