#include "sim/policy_standing.hpp"

#include "actors/tier_policy.hpp"

#include "cache/belady.hpp"
#include "cache/gap.hpp"
#include "runtime/check.hpp"
#include "runtime/prefix_chain.hpp"

#include <fmt/format.h>

#include <unordered_map>

namespace kvtier::sim {

dense_chains dense_chains_of(const trace& t, uint32_t block_tokens) {
  dense_chains out;
  std::unordered_map<block_hash, cache::block_key> keys;
  out.chains.reserve(t.requests.size());
  for (const auto& r : t.requests) {
    auto chain = chain_from_external(r.block_ids, r.block_tokens, r.input_tokens, block_tokens, tenant_salt{r.tenant});
    std::vector<cache::block_key> dense;
    dense.reserve(chain.size());
    for (const auto& h : chain)
      dense.push_back(keys.try_emplace(h, static_cast<cache::block_key>(keys.size())).first->second);
    out.chains.push_back(std::move(dense));
  }
  out.keys = keys.size();
  return out;
}

cache::policy_kind policy_kind_of(eviction_policy policy) {
  KVTIER_CHECK(policy != eviction_policy::oracle, "policy_kind_of: the oracle is a bound, not a tier policy");
  // LRU is no tier policy in the block manager (its free queues are LRU) but is one in the replay.
  return tier_policy_kind(policy).value_or(cache::policy_kind::lru);
}

cache::hierarchy_kind hierarchy_kind_of(cache_hierarchy hierarchy) {
  return hierarchy == cache_hierarchy::exclusive ? cache::hierarchy_kind::exclusive : cache::hierarchy_kind::inclusive;
}

policy_standing measure_policy(const dense_chains& chains, std::array<uint64_t, 3> capacities,
                               cache::policy_kind policy, cache::hierarchy_kind hierarchy) {
  policy_standing s;
  s.policy = policy;
  s.hierarchy = hierarchy;
  s.replay = cache::replay_tiers(chains.chains, chains.keys, capacities, policy, hierarchy);
  auto lru = policy == cache::policy_kind::lru
      ? s.replay
      : cache::replay_tiers(chains.chains, chains.keys, capacities, cache::policy_kind::lru, hierarchy);
  uint64_t through = 0;
  for (size_t t = 0; t < 3; ++t) {
    if (capacities[t] == 0)
      continue;
    through += capacities[t];
    tier_standing ts;
    ts.capacity_through = through;
    ts.hit_ratio = s.replay.hit_ratio_through(t);
    ts.lru_hit_ratio = lru.hit_ratio_through(t);
    ts.belady_hit_ratio = cache::belady_prefix_hits(chains.chains, chains.keys, through).hit_ratio();
    ts.gap_closed = cache::gap_closed(ts.hit_ratio, ts.lru_hit_ratio, ts.belady_hit_ratio);
    s.through[t] = ts;
  }
  return s;
}

void stand_for_lru(policy_standing& s, const std::array<uint64_t, 3>& prefix_hit_blocks, uint64_t prompt_blocks) {
  uint64_t hits = 0;
  for (size_t t = 0; t < 3; ++t) {
    hits += prefix_hit_blocks[t];
    if (auto& ts = s.through[t]) {
      ts->hit_ratio = prompt_blocks ? double(hits) / double(prompt_blocks) : 0.0;
      ts->lru_hit_ratio = ts->hit_ratio;
      ts->gap_closed = cache::gap_closed(ts->hit_ratio, ts->lru_hit_ratio, ts->belady_hit_ratio);
    }
  }
}

namespace {

double ratio_through(const timed_hits& h, size_t t) {
  uint64_t hits = 0;
  for (size_t i = 0; i <= t; ++i)
    hits += h.by_tier[i];
  return h.prompt_blocks ? double(hits) / double(h.prompt_blocks) : 0.0;
}

} // namespace

lru_source stand_timed(policy_standing& s, const timed_hits& run, const std::optional<timed_hits>& lru) {
  auto source = lru                         ? lru_source::twin
      : s.policy == cache::policy_kind::lru ? lru_source::this_run
                                            : lru_source::replay;
  for (size_t t = 0; t < 3; ++t) {
    if (auto& ts = s.through[t]) {
      ts->hit_ratio = ratio_through(run, t);
      if (source != lru_source::replay)
        ts->lru_hit_ratio = ratio_through(lru ? *lru : run, t);
      ts->gap_closed = cache::gap_closed(ts->hit_ratio, ts->lru_hit_ratio, ts->belady_hit_ratio);
    }
  }
  return source;
}

std::string standing_lines(const policy_standing& s) {
  static constexpr std::array<const char*, 3> tier_names{"hbm", "+dram", "+nvme"};
  std::string out;
  for (size_t t = 0; t < 3; ++t)
    if (const auto& ts = s.through[t])
      out += fmt::format("    {:<6} {:>9} blocks  {:.5f} / {:.5f} / {:.5f} / {}\n", tier_names[t], ts->capacity_through,
                         ts->hit_ratio, ts->lru_hit_ratio, ts->belady_hit_ratio,
                         ts->gap_closed ? fmt::format("{:.1f}%", 100 * *ts->gap_closed) : std::string("n/a (no gap)"));
  return out;
}

nlohmann::json to_json(const policy_standing& s) {
  static constexpr std::array<const char*, 3> names{"hbm", "dram", "nvme"};
  nlohmann::json tiers = nlohmann::json::object();
  for (size_t t = 0; t < 3; ++t) {
    if (!s.through[t])
      continue;
    const auto& ts = *s.through[t];
    const auto& c = s.replay.tiers[t];
    tiers[names[t]] = {{"capacity_blocks", c.capacity},
                       {"capacity_blocks_through", ts.capacity_through},
                       {"hit_blocks", c.hits},
                       {"hit_ratio_through", ts.hit_ratio},
                       {"lru_hit_ratio_through", ts.lru_hit_ratio},
                       {"belady_hit_ratio_through", ts.belady_hit_ratio},
                       {"gap_closed", ts.gap_closed ? nlohmann::json(*ts.gap_closed) : nlohmann::json()},
                       {"evictions", c.evictions},
                       {"evictions_lost", c.lost},
                       {"promotions", c.promotions},
                       {"demotions", c.demotions},
                       {"refused", c.refused}};
  }
  return {{"policy", std::string(cache::name_of(s.policy))},
          {"hierarchy", s.hierarchy == cache::hierarchy_kind::exclusive ? "exclusive" : "inclusive"},
          {"prefix_blocks_looked_up", s.replay.blocks},
          {"prefix_hit_ratio", s.replay.hit_ratio()},
          {"tiers", tiers}};
}

} // namespace kvtier::sim
