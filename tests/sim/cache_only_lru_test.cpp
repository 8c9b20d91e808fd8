// Cache-only replay against an independent model: an inclusive hierarchy of
// per-tier LRU sets of block hashes. When timing does not bind, every block a
// request leaves behind reaches every tier, so the block manager must give
// the model's hit ratio, tier by tier.

#include "sim/cache_only.hpp"
#include "sim/trace.hpp"

#include "runtime/error.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <list>
#include <unordered_map>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

// One tier: a set of block hashes of fixed capacity, least recently used
// evicted first. The list holds the order; `holders` maps a hash to its place
// in every tier at once (one lookup per block, not one per tier).
using lru_order = std::list<block_hash>;

struct lru_result {
  uint64_t prompt_blocks = 0;
  std::array<uint64_t, 3> hits{}; // by tier

  double hit_ratio() const {
    return static_cast<double>(hits[0] + hits[1] + hits[2]) / static_cast<double>(prompt_blocks);
  }
};

// Every request looks up its prompt's leading blocks (a hit counts at the
// highest tier holding the block; the first miss ends the prefix), then
// writes all its blocks through every tier, its last block touched first so
// that a prompt's tail is evicted before its head.
lru_result inclusive_lru(const trace& t, const config& cfg) {
  constexpr size_t tiers = 3;
  const std::array<uint64_t, tiers> capacity{cfg.hbm_blocks(), cfg.dram_blocks(), cfg.nvme_blocks()};
  std::array<lru_order, tiers> order; // most recent first
  std::array<uint64_t, tiers> size{};
  struct places {
    std::array<lru_order::iterator, tiers> at;
    std::array<bool, tiers> held{};
  };
  std::unordered_map<block_hash, places> holders;
  holders.reserve(capacity[0] + capacity[1] + capacity[2]);

  lru_result out;
  const uint32_t B = cfg.cache.block_tokens;
  for (const auto& r : t.requests) {
    auto chain = chain_from_external(r.block_ids, r.block_tokens, r.input_tokens, B, tenant_salt{r.tenant});
    out.prompt_blocks += chain.size();
    for (const auto& h : chain) {
      auto it = holders.find(h);
      if (it == holders.end())
        break;
      auto top = std::find(it->second.held.begin(), it->second.held.end(), true);
      ++out.hits[static_cast<size_t>(top - it->second.held.begin())];
    }
    for (auto h = chain.rbegin(); h != chain.rend(); ++h) {
      auto& p = holders[*h];
      for (size_t k = 0; k < tiers; ++k) {
        if (capacity[k] == 0)
          continue;
        if (p.held[k]) {
          order[k].splice(order[k].begin(), order[k], p.at[k]);
          continue;
        }
        if (size[k] == capacity[k]) {
          auto victim = holders.find(order[k].back());
          order[k].pop_back();
          victim->second.held[k] = false;
          --size[k];
          if (std::none_of(victim->second.held.begin(), victim->second.held.end(), [](bool b) { return b; }) &&
              victim->first != *h)
            holders.erase(victim);
        }
        order[k].push_front(*h);
        p.at[k] = order[k].begin();
        p.held[k] = true;
        ++size[k];
      }
    }
  }
  return out;
}

trace conversation(uint64_t max_requests) {
  trace_read_options o;
  o.max_requests = max_requests;
  auto t = read_trace(default_trace_path(), trace_format::mooncake, o);
  EXPECT_TRUE(t) << describe(t.error());
  return *t;
}

config config_of(const std::string& text) {
  auto cfg = parse_config(text, "test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  return *cfg;
}

void expect_agreement(const config& cfg, const trace& t) {
  auto model = inclusive_lru(t, cfg);
  auto replay = run_cache_only(cfg, t);
  ASSERT_EQ(replay.blocks.prompt_blocks, model.prompt_blocks);
  EXPECT_EQ(replay.uncacheable_requests, 0u);
  std::cout << "block_tokens " << cfg.cache.block_tokens << ": model " << model.hit_ratio() << " (hbm " << model.hits[0]
            << ", dram " << model.hits[1] << ", nvme " << model.hits[2] << "), replay " << replay.hit_ratio()
            << " (hbm " << replay.blocks.tiers[0].prefix_hit_blocks << ", dram "
            << replay.blocks.tiers[1].prefix_hit_blocks << ", nvme " << replay.blocks.tiers[2].prefix_hit_blocks
            << ")\n";
  // The block manager evicts clean copies before sole ones, which a plain LRU
  // does not: a small tolerance, by tier and in total.
  EXPECT_NEAR(replay.hit_ratio(), model.hit_ratio(), 0.005);
  const auto blocks = static_cast<double>(model.prompt_blocks);
  for (auto where : {tier::hbm, tier::dram, tier::nvme})
    EXPECT_NEAR(static_cast<double>(replay.blocks.tiers[index_of(where)].prefix_hit_blocks) / blocks,
                static_cast<double>(model.hits[index_of(where)]) / blocks, 0.005)
        << name_of(where);
}

// Capacities at which every tier serves a good share of the hits of the
// trace's first requests (HBM holds the largest of them with room to spare).
const char* tiers_that_matter = "[tiers.hbm]\ncapacity = \"32GB\"\n[tiers.dram]\ncapacity = \"256GB\"\n"
                                "[tiers.nvme]\ncapacity = \"768GB\"\n";
constexpr uint64_t first_requests = 600;

} // namespace

TEST(cache_only_lru, agrees_with_inclusive_lru_at_16_token_blocks) {
  auto cfg = config_of(std::string(tiers_that_matter) + "[cache]\nblock_tokens = 16\n");
  expect_agreement(cfg, conversation(first_requests));
}

TEST(cache_only_lru, agrees_with_inclusive_lru_at_512_token_blocks) {
  auto cfg = config_of(std::string(tiers_that_matter) + "[cache]\nblock_tokens = 512\n");
  expect_agreement(cfg, conversation(first_requests));
}
