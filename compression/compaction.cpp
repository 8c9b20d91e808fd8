#include "compression/compaction.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier::compression {

compaction_plan plan_compaction(std::span<const std::vector<uint32_t>> kept_per_slice, uint64_t tokens_before,
                                uint32_t block_tokens) {
  KVTIER_CHECK(block_tokens > 0, "plan_compaction: block_tokens is 0");
  compaction_plan plan;
  plan.tokens_before = tokens_before;
  for (const auto& kept : kept_per_slice)
    plan.tokens_after = std::max<uint64_t>(plan.tokens_after, kept.size());
  plan.blocks_before = (tokens_before + block_tokens - 1) / block_tokens;
  plan.blocks_after = (plan.tokens_after + block_tokens - 1) / block_tokens;
  for (uint64_t b = plan.blocks_before; b > plan.blocks_after; --b)
    plan.freed_blocks.push_back(b - 1);
  for (uint32_t s = 0; s < kept_per_slice.size(); ++s) {
    const auto& kept = kept_per_slice[s];
    for (uint32_t k = 0; k < kept.size(); ++k) {
      KVTIER_CHECK(kept[k] < tokens_before && (k == 0 || kept[k - 1] < kept[k]),
                   "plan_compaction: kept tokens must be ascending and in range");
      if (kept[k] != k)
        plan.moves.push_back({s, kept[k], k});
    }
    plan.padding += plan.tokens_after - kept.size();
  }
  return plan;
}

} // namespace kvtier::compression
