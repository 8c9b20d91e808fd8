// The reuse predictor shared by a stack: alone it is the per-tier predictor,
// and in an exclusive stack a demoted block keeps its priority.

#include "cache/reuse_predictor.hpp"
#include "cache/shared_predictor.hpp"
#include "cache/tier_replay.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier::cache {
namespace {

// Requests over a few shared prefixes with private tails, seeded.
std::vector<std::vector<block_key>> prefix_requests(int n) {
  std::vector<std::vector<block_key>> chains;
  uint64_t x = 7;
  block_key fresh = 100;
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    auto r = static_cast<block_key>((x >> 33) % 8);
    std::vector<block_key> c{r % 3, 3 + r};
    for (uint64_t k = 0; k < 1 + (x >> 40) % 3; ++k)
      c.push_back(fresh++);
    chains.push_back(c);
  }
  return chains;
}

TEST(shared_predictor, alone_it_is_the_per_tier_predictor) {
  auto chains = prefix_requests(600);
  for (uint64_t capacity : {4u, 9u, 20u}) {
    auto own = replay_tiers(chains, 2000, {capacity, 0, 0}, policy_kind::predictor, hierarchy_kind::exclusive);
    auto shared =
        replay_tiers(chains, 2000, {capacity, 0, 0}, policy_kind::shared_predictor, hierarchy_kind::exclusive);
    EXPECT_EQ(shared.hit_blocks(), own.hit_blocks()) << capacity;
    EXPECT_EQ(shared.tiers[0].evictions, own.tiers[0].evictions) << capacity;
  }
}

// HBM of 1 over DRAM of 2: B's priority came from its access, so when C
// pushes it down it outranks nothing younger in DRAM; A, oldest, leaves the
// stack first, exactly as from one pool of 3.
TEST(shared_predictor, a_demoted_block_keeps_its_priority) {
  auto tiers = make_shared_predictor_stack({1, 2, 0});
  const block_context c{0, 0, false, false};
  EXPECT_EQ(tiers[0]->insert(0, c), std::nullopt);
  auto v = tiers[0]->insert(1, c); // A down
  ASSERT_EQ(v, std::optional<block_key>(0));
  EXPECT_EQ(tiers[1]->insert(0, c), std::nullopt);
  v = tiers[0]->insert(2, c); // B down
  ASSERT_EQ(v, std::optional<block_key>(1));
  EXPECT_EQ(tiers[1]->insert(1, c), std::nullopt);
  v = tiers[0]->insert(3, c); // C down: DRAM is full, its lowest priority (A) leaves
  ASSERT_EQ(v, std::optional<block_key>(2));
  EXPECT_EQ(tiers[1]->insert(2, c), std::optional<block_key>(0));
  EXPECT_TRUE(tiers[1]->contains(1));
}

} // namespace
} // namespace kvtier::cache
