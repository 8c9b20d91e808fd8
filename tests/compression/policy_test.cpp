// Every policy on cases small enough to work out by hand: which tokens are kept.

#include "compression/baselines.hpp"
#include "compression/block_selection.hpp"
#include "compression/budget.hpp"
#include "compression/h2o.hpp"
#include "compression/policy_factory.hpp"
#include "compression/schedule.hpp"
#include "compression/snapkv.hpp"
#include "compression/streaming_llm.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier::compression;
using tokens = std::vector<uint32_t>;

namespace {

// Four prompt queries over four keys (group 1). Rows are causal and sum to 1.
observed_attention prefill4() {
  observed_attention a;
  a.keys = 4;
  a.group = 1;
  a.query_pos = {0, 1, 2, 3};
  a.probs = {1.0f,   0,      0,     0, //
             0.5f,   0.5f,   0,     0, //
             0.25f,  0.25f,  0.5f,  0, //
             0.125f, 0.125f, 0.25f, 0.5f};
  return a;
}

observed_attention keys_only(uint32_t n) {
  observed_attention a;
  a.keys = n;
  return a;
}

} // namespace

TEST(keep_top, protected_tokens_first_then_the_highest_scores) {
  std::vector<float> s{5, 1, 4, 1, 3, 0, 2, 9};
  EXPECT_EQ(keep_top(s, 4, {1, 2}), (tokens{0, 2, 6, 7}));
  EXPECT_EQ(keep_top(s, 3, {}), (tokens{0, 2, 7}));
  EXPECT_EQ(keep_top(s, 100, {}).size(), 8u);
}

TEST(keep_top, ties_go_to_the_later_token) {
  std::vector<float> s{1, 1, 1, 1};
  EXPECT_EQ(keep_top(s, 2, {}), (tokens{2, 3}));
}

TEST(keep_top, a_budget_below_the_protected_count_keeps_the_newest) {
  std::vector<float> s(6, 0.0f);
  EXPECT_EQ(keep_top(s, 2, {2, 2}), (tokens{4, 5}));
  EXPECT_EQ(keep_top(s, 3, {2, 2}), (tokens{0, 4, 5}));
}

TEST(streaming_llm, sinks_plus_the_recent_window) {
  EXPECT_EQ(select_tokens(streaming_llm(2), keys_only(10), 5), (tokens{0, 1, 7, 8, 9}));
  EXPECT_EQ(select_tokens(sliding_window(), keys_only(10), 3), (tokens{7, 8, 9}));
}

TEST(h2o, raw_sums_favour_early_tokens_normalized_does_not) {
  auto a = prefill4();
  // raw sums 1.875, 0.875, 0.75, 0.5: the tokens with the most observers win.
  h2o raw(h2o_accumulation::raw, {});
  EXPECT_EQ(raw.score(a), (std::vector<float>{1.875f, 0.875f, 0.75f, 0.5f}));
  EXPECT_EQ(select_tokens(raw, a, 2), (tokens{0, 1}));
  // Normalized by observers (4, 3, 2, 1): 0.46875, 0.2916.., 0.375, 0.5.
  h2o mean(h2o_accumulation::normalized, {});
  auto s = mean.score(a);
  EXPECT_FLOAT_EQ(s[0], 0.46875f);
  EXPECT_FLOAT_EQ(s[1], 0.875f / 3);
  EXPECT_FLOAT_EQ(s[2], 0.375f);
  EXPECT_FLOAT_EQ(s[3], 0.5f);
  EXPECT_EQ(select_tokens(mean, a, 2), (tokens{0, 3}));
  // Window accumulation over the last two queries: 0.375, 0.375, 0.75, 0.5.
  h2o window(h2o_accumulation::window, {}, 2);
  EXPECT_EQ(window.score(a), (std::vector<float>{0.375f, 0.375f, 0.75f, 0.5f}));
  EXPECT_EQ(select_tokens(window, a, 2), (tokens{2, 3}));
}

TEST(h2o, the_recent_window_is_protected) {
  h2o raw(h2o_accumulation::raw, {0, 1});
  EXPECT_EQ(select_tokens(raw, prefill4(), 2), (tokens{0, 3}));
}

TEST(snapkv, window_votes_pooled_over_neighbours) {
  observed_attention a;
  a.keys = 6;
  a.group = 2;
  a.query_pos = {4, 5};
  a.probs = {0,    0.5f, 0, 0,     0.5f,  0,     // head 0, query 4
             0,    0,    0, 0.25f, 0.25f, 0.5f,  // head 0, query 5
             0,    0,    0, 0,     1.0f,  0,     // head 1, query 4
             0.5f, 0,    0, 0,     0,     0.5f}; // head 1, query 5
  // votes 0.5, 0.5, 0, 0.25, 1.75, 1.0; max pool of 3: 0.5, 0.5, 0.5, 1.75, 1.75, 1.75.
  snapkv pooled(2, 3, 0);
  EXPECT_EQ(pooled.score(a), (std::vector<float>{0.5f, 0.5f, 0.5f, 1.75f, 1.75f, 1.75f}));
  EXPECT_EQ(select_tokens(pooled, a, 4), (tokens{2, 3, 4, 5}));
  snapkv plain(2, 1, 0);
  EXPECT_EQ(select_tokens(plain, a, 4), (tokens{0, 1, 4, 5}));
}

TEST(baselines, oracle_keeps_what_the_future_attends) {
  observed_attention future;
  future.keys = 5;
  future.group = 1;
  future.query_pos = {5, 6};
  future.probs = {0.5f, 0, 0.25f, 0, 0.25f, //
                  0.5f, 0, 0,     0, 0.5f};
  oracle o(future);
  EXPECT_EQ(select_tokens(o, keys_only(5), 2), (tokens{0, 4}));
}

TEST(baselines, random_eviction_is_seeded_and_protects) {
  random_eviction a(7, {1, 2}), b(7, {1, 2}), c(8, {1, 2});
  auto ka = select_tokens(a, keys_only(100), 20);
  EXPECT_EQ(ka, select_tokens(b, keys_only(100), 20));
  EXPECT_NE(ka, select_tokens(c, keys_only(100), 20));
  EXPECT_EQ(ka.size(), 20u);
  EXPECT_EQ(ka.front(), 0u);
  EXPECT_EQ(ka[18], 98u);
  EXPECT_EQ(ka[19], 99u);
}

TEST(policy_factory, knows_every_name_and_refuses_others) {
  observed_attention future = keys_only(4);
  for (auto name : policy_names()) {
    auto p = make_policy(name, {}, &future);
    ASSERT_TRUE(p) << name;
    EXPECT_EQ((*p)->name(), name);
  }
  auto bad = make_policy("h20", {});
  ASSERT_FALSE(bad);
  EXPECT_TRUE(kvtier::is(bad.error(), kvtier::errc::invalid_argument));
  EXPECT_FALSE(make_policy("oracle", {}));
}

TEST(budget, ratio_floor_cap_and_overrides) {
  budget_spec b;
  b.ratio = 0.2;
  EXPECT_EQ(b.tokens(0, 0, 8, 100), 20u);
  EXPECT_EQ(b.tokens(0, 0, 8, 101), 21u); // ceil
  b.min_tokens = 36;
  EXPECT_EQ(b.tokens(0, 0, 8, 100), 36u);
  EXPECT_EQ(b.tokens(0, 0, 8, 30), 30u);
  b.max_tokens = 50;
  EXPECT_EQ(b.tokens(0, 0, 8, 1000), 50u);
  b = budget_spec{};
  b.ratio = 0.5;
  b.layer_ratio = {1.0, 0.1};
  EXPECT_EQ(b.tokens(0, 3, 8, 100), 100u);
  EXPECT_EQ(b.tokens(1, 3, 8, 100), 10u);
  b.head_ratio = {0.1, 0.2, 0.3, 0.4};
  EXPECT_EQ(b.tokens(1, 1, 2, 100), 40u);
}

TEST(schedule, at_prefill_end_and_every_n_tokens) {
  compression_trigger t;
  t.every_tokens = 64;
  t.min_tokens = 100;
  EXPECT_TRUE(t.due(0, 768, true));
  EXPECT_FALSE(t.due(0, 50, true));    // below min_tokens
  EXPECT_TRUE(t.due(127, 128, false)); // crosses 128
  EXPECT_FALSE(t.due(128, 129, false));
  t.at_prefill_end = false;
  EXPECT_FALSE(t.due(700, 701, true));
}

// Block granularity (the real engine's compaction): 8 blocks of 4 tokens,
// 30 tokens (the last block holds 2). Sinks 4 protect block 0, the recent 8
// tokens (positions 22..29) blocks 5, 6 and 7.
TEST(block_selection, keeps_protected_blocks_and_the_best_scored_rest) {
  const std::vector<float> mass{1, 5, 0.5f, 4, 3, 0.1f, 0, 0};
  block_choice c;
  c.kv_tokens = 30;
  c.block_tokens = 4;
  c.sinks = 4;
  c.recent = 8;
  c.mass = mass;
  c.keep_tokens = 20; // 5 blocks: 0, 5, 6, 7 and the best other
  c.policy = "snapkv";
  EXPECT_EQ(blocks_to_drop(c), (tokens{2, 3, 4}));
  c.policy = "streaming_llm";
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 2, 3}));
  c.policy = "sliding_window"; // no sinks: the newest five
  EXPECT_EQ(blocks_to_drop(c), (tokens{0, 1, 2}));
  // No mass measured (the simulator): the mass policies keep the newest.
  c.policy = "h2o";
  c.mass = {};
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 2, 3}));
  // A budget below the protected blocks keeps just those; above the table, everything.
  c.keep_tokens = 1;
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 2, 3, 4}));
  c.keep_tokens = 1000;
  EXPECT_TRUE(blocks_to_drop(c).empty());
  EXPECT_NEAR(mass_kept(mass, tokens{1, 3}), 4.6 / 13.6, 1e-9);
}

// Normalized H2O: a block is scored by its mass over the observed queries
// that could see it, so late blocks are not buried by the early-token trap.
TEST(block_selection, h2o_normalizes_by_the_queries_that_saw_each_block) {
  const std::vector<float> mass{9, 6, 2, 1.5f, 1};
  block_choice c;
  c.policy = "h2o";
  c.kv_tokens = 20; // 5 full blocks of 4
  c.block_tokens = 4;
  c.sinks = 0;
  c.recent = 4;
  c.mass = mass;
  c.mass_queries = 20; // every entry a query: block b is seen by 20 - 4b
  auto score = block_scores(c);
  EXPECT_DOUBLE_EQ(score[0], 9.0 / 20);
  EXPECT_DOUBLE_EQ(score[3], 1.5 / 8);
  c.keep_tokens = 12; // 3 blocks: block 4 and the two best of 9/20, 6/16, 2/12, 1.5/8
  EXPECT_EQ(blocks_to_drop(c), (tokens{2, 3}));
  c.policy = "h2o_raw"; // the raw sum ranks the same here
  EXPECT_EQ(blocks_to_drop(c), (tokens{2, 3}));
  const std::vector<float> close{9, 2, 2, 1.9f, 1};
  c.mass = close;
  c.policy = "h2o"; // 1.9 / 8 beats 2 / 16 and 2 / 12
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 2}));
  c.policy = "h2o_raw"; // raw: 2 beats 1.9, ties to the later block
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 3}));
  // Accumulated over passes: what block 1 gathered before outweighs this pass.
  const std::vector<double> earlier{0, 0.5, 0, 0, 0};
  c.earlier = earlier;
  EXPECT_DOUBLE_EQ(block_scores(c)[1], 2.5);
  EXPECT_EQ(blocks_to_drop(c), (tokens{2, 3}));
  c.policy = "snapkv"; // SnapKV looks at its window only
  EXPECT_EQ(blocks_to_drop(c), (tokens{1, 3}));
}
