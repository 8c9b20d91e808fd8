// The tier replay: inclusive and exclusive hierarchies on hand-made chains,
// and the Belady bound.

#include "cache/belady.hpp"
#include "cache/tier_replay.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier::cache {
namespace {

// A, B, C one block each, then A again, through 1 + 1 + 1 blocks of LRU.
const std::vector<std::vector<block_key>> abca{{0}, {1}, {2}, {0}};

TEST(tier_replay, exclusive_moves_victims_down_and_promotions_free_below) {
  auto r = replay_tiers(abca, 3, {1, 1, 1}, policy_kind::lru, hierarchy_kind::exclusive);
  EXPECT_EQ(r.blocks, 4u);
  EXPECT_EQ(r.tiers[2].hits, 1u);       // A, found in NVMe
  EXPECT_EQ(r.tiers[2].promotions, 1u); // ... moved up, its NVMe slot freed
  EXPECT_EQ(r.tiers[1].demotions, 3u);  // A, B, then C
  EXPECT_EQ(r.tiers[2].demotions, 2u);  // A, then B into the slot A's promotion freed
  EXPECT_EQ(r.tiers[0].evictions, 3u);
  EXPECT_EQ(r.tiers[1].evictions, 2u);
  EXPECT_EQ(r.tiers[2].evictions, 0u); // nothing had to leave NVMe
  EXPECT_EQ(r.tiers[0].lost + r.tiers[1].lost + r.tiers[2].lost, 0u);
  EXPECT_EQ(r.extra_copies, 0u);
}

TEST(tier_replay, inclusive_keeps_the_copy_below) {
  auto r = replay_tiers(abca, 3, {1, 1, 1}, policy_kind::lru, hierarchy_kind::inclusive);
  EXPECT_EQ(r.tiers[2].hits, 1u);
  EXPECT_EQ(r.tiers[2].promotions, 1u);
  EXPECT_EQ(r.tiers[2].evictions, 1u); // B pushes out A's NVMe copy; A is in HBM: not lost
  EXPECT_EQ(r.tiers[2].lost, 0u);
  EXPECT_EQ(r.extra_copies, 0u); // A's only copy after the last request is HBM's
}

// Exclusive: a block is in exactly one tier after every request, for every
// policy, on a trace with shared prefixes and repeats.
TEST(tier_replay, exclusive_holds_one_copy_for_every_policy) {
  std::vector<std::vector<block_key>> chains;
  uint64_t x = 12345;
  for (int r = 0; r < 400; ++r) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    std::vector<block_key> c{0};
    auto len = 1 + (x >> 60);
    for (uint64_t i = 0; i < len; ++i)
      c.push_back(static_cast<block_key>(1 + ((x >> ((8 + 4 * i) % 64)) % 64)));
    chains.push_back(c);
  }
  for (auto k : {policy_kind::lru, policy_kind::arc, policy_kind::s3fifo, policy_kind::lfuda, policy_kind::predictor}) {
    auto r = replay_tiers(chains, 65, {4, 8, 16}, k, hierarchy_kind::exclusive);
    EXPECT_EQ(r.extra_copies, 0u) << name_of(k);
    EXPECT_GT(r.hit_blocks(), 0u) << name_of(k);
    auto in = replay_tiers(chains, 65, {4, 8, 16}, k, hierarchy_kind::inclusive);
    EXPECT_GT(in.extra_copies, 0u) << name_of(k);
  }
}

TEST(tier_replay, an_exclusive_lru_stack_is_one_lru_pool) {
  std::vector<std::vector<block_key>> chains;
  for (int r = 0; r < 200; ++r)
    chains.push_back({0, static_cast<block_key>(1 + r % 7), static_cast<block_key>(8 + r % 11)});
  auto stacked = replay_tiers(chains, 19, {2, 3, 4}, policy_kind::lru, hierarchy_kind::exclusive);
  auto pool = replay_tiers(chains, 19, {9, 0, 0}, policy_kind::lru, hierarchy_kind::exclusive);
  EXPECT_EQ(stacked.hit_blocks(), pool.hit_blocks());
}

TEST(belady, evicts_the_furthest_next_use) {
  // Capacity 2: after {0,1}, {2} must push out 1 (used last) and keep 0.
  std::vector<std::vector<block_key>> chains{{0, 1}, {2}, {0}, {2}, {1}};
  auto b = belady_prefix_hits(chains, 3, 2);
  EXPECT_EQ(b.blocks, 6u);
  EXPECT_EQ(b.hit_blocks, 2u); // 0 and 2; 1 was given up
}

} // namespace
} // namespace kvtier::cache
