#pragma once
// The oracle bound: the prefix hit ratio of Belady's policy (evict the block
// whose next use lies furthest in the future) over one pool as large as all
// tiers together, knowing every future request of the trace. No real policy
// can do better with that much memory, so it bounds what LRU, tiering and
// watermarks can still gain. Used by `kvtier sim --cache-only` with
// `[cache] policy = "oracle"`.

#include "sim/trace.hpp"

#include <cstdint>

namespace kvtier::sim {

struct oracle_result {
  uint64_t blocks = 0;     // prompt blocks looked up
  uint64_t hit_blocks = 0; // leading blocks found cached
  uint64_t evictions = 0;
  double hit_ratio() const { return blocks ? double(hit_blocks) / double(blocks) : 0.0; }
};

oracle_result oracle_prefix_hits(const trace& t, uint32_t block_tokens, uint64_t capacity_blocks);

} // namespace kvtier::sim
