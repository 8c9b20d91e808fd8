// The bundled Mooncake trace at 512-token blocks through cache/'s tier
// replay: the hierarchy and bound figures the cache policy work starts from,
// exact, and the predictor's standing against them.

#include "sim/policy_standing.hpp"
#include "sim/trace.hpp"

#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

const dense_chains& bundled_512() {
  static const dense_chains chains = [] {
    trace_read_options o;
    auto t = read_trace(default_trace_path(), trace_format::mooncake, o);
    EXPECT_TRUE(t) << (t ? "" : describe(t.error()));
    return dense_chains_of(*t, 512);
  }();
  return chains;
}

uint64_t hits(const policy_standing& s) {
  return s.replay.hit_blocks();
}

TEST(policy_standing, exclusive_lru_of_1k_plus_3k_is_a_4k_pool) {
  const auto& c = bundled_512();
  auto exclusive = measure_policy(c, {1000, 3000, 0}, cache::policy_kind::lru, cache::hierarchy_kind::exclusive);
  auto pool = measure_policy(c, {4000, 0, 0}, cache::policy_kind::lru, cache::hierarchy_kind::exclusive);
  auto inclusive = measure_policy(c, {1000, 3000, 0}, cache::policy_kind::lru, cache::hierarchy_kind::inclusive);
  EXPECT_EQ(exclusive.replay.blocks, 288'500u);
  EXPECT_EQ(hits(exclusive), hits(pool));
  EXPECT_EQ(hits(exclusive), 24'964u);
  EXPECT_EQ(hits(inclusive), 24'105u);
  EXPECT_EQ(exclusive.replay.extra_copies, 0u);
}

TEST(policy_standing, belady_bounds_for_the_same_memory) {
  const auto& c = bundled_512();
  auto s = measure_policy(c, {1000, 3000, 16000}, cache::policy_kind::lru, cache::hierarchy_kind::exclusive);
  EXPECT_NEAR(s.through[0]->belady_hit_ratio, 0.190707, 5e-6);
  EXPECT_NEAR(s.through[1]->belady_hit_ratio, 0.322336, 5e-6);
  EXPECT_NEAR(s.through[2]->belady_hit_ratio, 0.36641, 5e-6); // the trace's ideal: 105,710 of 288,500
  EXPECT_DOUBLE_EQ(*s.through[2]->gap_closed, 0.0);           // LRU against itself
}

TEST(policy_standing, predictor_closes_part_of_the_gap_and_stays_above_lru) {
  const auto& c = bundled_512();
  for (std::array<uint64_t, 3> caps :
       {std::array<uint64_t, 3>{1000, 0, 0}, {4000, 0, 0}, {1000, 3000, 0}, {1000, 3000, 16000}}) {
    auto s = measure_policy(c, caps, cache::policy_kind::predictor, cache::hierarchy_kind::exclusive);
    const auto& last = caps[2] ? *s.through[2] : caps[1] ? *s.through[1] : *s.through[0];
    EXPECT_GT(*last.gap_closed, 0.0) << caps[0] << "+" << caps[1] << "+" << caps[2];
  }
}

} // namespace

namespace {

// Four hand-made requests (11 blocks): the block manager's own hits replace
// the replay's and stand for LRU, against Belady over the same memory.
TEST(policy_standing, block_manager_hits_stand_for_lru) {
  dense_chains c{{{0, 1, 2}, {0, 1, 3}, {0, 4}, {0, 1, 2}}, 5};
  auto s = measure_policy(c, {2, 2, 0}, cache::policy_kind::lru, cache::hierarchy_kind::exclusive);
  stand_for_lru(s, {3, 1, 0}, 11);
  ASSERT_TRUE(s.through[0] && s.through[1]);
  EXPECT_FALSE(s.through[2]);
  EXPECT_DOUBLE_EQ(s.through[0]->hit_ratio, 3.0 / 11);
  EXPECT_DOUBLE_EQ(s.through[1]->hit_ratio, 4.0 / 11);
  EXPECT_DOUBLE_EQ(s.through[1]->lru_hit_ratio, 4.0 / 11);
  EXPECT_DOUBLE_EQ(s.through[0]->belady_hit_ratio, 5.0 / 11); // 0 and 1 kept: 0 thrice, 1 twice
  EXPECT_DOUBLE_EQ(s.through[1]->belady_hit_ratio, 6.0 / 11); // the ideal: every repeat
  EXPECT_DOUBLE_EQ(*s.through[1]->gap_closed, 0.0);
  EXPECT_EQ(standing_lines(s),
            "    hbm            2 blocks  0.27273 / 0.27273 / 0.45455 / 0.0%\n"
            "    +dram          4 blocks  0.36364 / 0.36364 / 0.54545 / 0.0%\n");
}

// A timed run under a policy: its hits replace the replay's; LRU's come from
// its LRU twin, or stay the replay's without one.
TEST(policy_standing, timed_policy_run_against_its_lru_twin) {
  dense_chains c{{{0, 1, 2}, {0, 1, 3}, {0, 4}, {0, 1, 2}}, 5};
  auto s = measure_policy(c, {2, 2, 0}, cache::policy_kind::s3fifo, cache::hierarchy_kind::exclusive);
  auto replay_lru = s.through[1]->lru_hit_ratio;
  EXPECT_EQ(stand_timed(s, {{4, 1, 0}, 11}, std::nullopt), lru_source::replay);
  EXPECT_DOUBLE_EQ(s.through[1]->hit_ratio, 5.0 / 11);
  EXPECT_DOUBLE_EQ(s.through[1]->lru_hit_ratio, replay_lru);
  EXPECT_EQ(stand_timed(s, {{4, 1, 0}, 11}, timed_hits{{3, 1, 0}, 11}), lru_source::twin);
  EXPECT_DOUBLE_EQ(s.through[0]->lru_hit_ratio, 3.0 / 11);
  EXPECT_DOUBLE_EQ(s.through[1]->lru_hit_ratio, 4.0 / 11);
  EXPECT_DOUBLE_EQ(*s.through[1]->gap_closed, 0.5); // (5 - 4) / (6 - 4)
  EXPECT_DOUBLE_EQ(*s.through[0]->gap_closed, 0.5); // (4 - 3) / (5 - 3)
}

} // namespace
