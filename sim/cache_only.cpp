#include "sim/cache_only.hpp"

#include "actors/block_manager_state.hpp"
#include "runtime/prefix_chain.hpp"

#include <chrono>

namespace kvtier::sim {
namespace {

void drain(block_manager_state& bm) {
  for (auto batches = bm.take_transfers(); !batches.empty(); batches = bm.take_transfers())
    for (const auto& b : batches)
      bm.on_transfer_done(b.tag, true);
}

// In a timed run demotions stream: every landed batch starts the next, until
// the dirty lists are empty or the tiers below are full. One demote_ahead()
// starts at most a tier's in-flight cap of them, a fraction of what a request
// of 16-token blocks frees, so the rest would be evicted as sole copies. With
// moves that complete at once, streaming is: demote until nothing is started.
void settle_demotions(block_manager_state& bm) {
  for (;;) {
    bm.demote_ahead();
    auto batches = bm.take_transfers();
    if (batches.empty())
      return;
    for (const auto& b : batches)
      bm.on_transfer_done(b.tag, true);
  }
}

} // namespace

double cache_only_result::hit_ratio() const {
  uint64_t hits = 0;
  for (const auto& t : blocks.tiers)
    hits += t.prefix_hit_blocks;
  return blocks.prompt_blocks ? static_cast<double>(hits) / static_cast<double>(blocks.prompt_blocks) : 0.0;
}

nlohmann::json cache_only_result::to_json() const {
  nlohmann::json by_tier;
  for (auto t : {tier::hbm, tier::dram, tier::nvme})
    by_tier[std::string(name_of(t))] = blocks.tiers[index_of(t)].prefix_hit_blocks;
  return {
      {"mode", "cache-only"},
      {"requests", requests},
      {"uncacheable_requests", uncacheable_requests},
      {"prefix_blocks_looked_up", blocks.prompt_blocks},
      {"prefix_hit_blocks", by_tier},
      {"miss_blocks", blocks.miss_blocks},
      {"prefix_hit_ratio", hit_ratio()},
      {"evictions",
       {{"hbm", blocks.tiers[0].evictions}, {"dram", blocks.tiers[1].evictions}, {"nvme", blocks.tiers[2].evictions}}},
      {"wall_seconds", wall_seconds}};
}

cache_only_result run_cache_only(const config& cfg, const trace& t, uint64_t hbm_blocks_override) {
  auto start = std::chrono::steady_clock::now();
  cache_only_result result;
  auto o = block_manager_options_from(cfg);
  if (hbm_blocks_override)
    o.hbm_blocks = static_cast<uint32_t>(hbm_blocks_override);
  block_manager_state bm(o, &result.blocks);
  for (const auto& r : t.requests) {
    ++result.requests;
    auto chain =
        chain_from_external(r.block_ids, r.block_tokens, r.input_tokens, o.block_tokens, tenant_salt{r.tenant});
    auto admitted = bm.admit(r.id, std::move(chain), r.input_tokens);
    if (admitted.status == admit_status::no_room) {
      ++result.uncacheable_requests;
      continue;
    }
    drain(bm);
    uint64_t left = r.input_tokens - admitted.hit_tokens;
    if (left > 0 && !bm.grow(r.id, static_cast<uint32_t>(left)))
      ++result.uncacheable_requests;
    bm.release(r.id);
    settle_demotions(bm);
  }
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

} // namespace kvtier::sim
