// The reuse predictor: class features, admission learned from a hand-made
// trace, and reuse-aware eviction.

#include "cache/reuse_predictor.hpp"

#include <gtest/gtest.h>

namespace kvtier::cache {
namespace {

TEST(reuse_predictor, classes_separate_past_uses_tails_and_suffixes) {
  EXPECT_EQ(reuse_predictor::class_of({0, 5, false, false}), 0u);
  EXPECT_EQ(reuse_predictor::class_of({0, 5, false, true}), 1u);
  EXPECT_EQ(reuse_predictor::class_of({0, 5, true, false}), 2u);
  EXPECT_EQ(reuse_predictor::class_of({2, 0, false, false}), 8u);
  EXPECT_EQ(reuse_predictor::class_of({7, 0, false, false}), 12u);
  EXPECT_EQ(reuse_predictor::class_of({8, 0, true, true}), 19u);
}

// Every request: the shared block 0 (hit), then a fresh tail block that is
// never seen again. Tails stop being stored once the evidence says they are
// never reused; the shared block's class keeps being admitted.
TEST(reuse_predictor, refuses_tails_that_are_never_reused) {
  predictor_params params;
  params.decay = 1.0;
  params.admit_floor = 0.2;
  params.admit_min_events = 8;
  reuse_predictor p(4, params);
  const block_context shared{1, 0, false, false};
  const block_context tail{0, 1, true, false};
  p.insert(0, {0, 0, false, false});
  std::vector<bool> admitted;
  block_key next = 1;
  for (int r = 0; r < 16; ++r) {
    p.on_hit(0, shared);
    admitted.push_back(p.admit(tail));
    if (admitted.back())
      p.insert(next, tail);
    ++next;
  }
  // A tail counts as not reused once T = 4 accesses (two requests) passed
  // without its reuse; the eighth such, at request 10, is enough evidence.
  std::vector<bool> expected(16, true);
  for (size_t r = 10; r < 16; ++r)
    expected[r] = false;
  EXPECT_EQ(admitted, expected);
  EXPECT_TRUE(p.admit(shared));
  EXPECT_TRUE(p.contains(0));
  EXPECT_LT(p.reuse_probability(reuse_predictor::class_of(tail)), 0.2);
  EXPECT_GT(p.reuse_probability(reuse_predictor::class_of(shared)), 0.8);
}

// With no evidence every class has the same value and eviction is LRU.
TEST(reuse_predictor, untrained_evicts_like_lru) {
  reuse_predictor p(2);
  const block_context c{0, 0, false, false};
  EXPECT_FALSE(p.insert(1, c));
  EXPECT_FALSE(p.insert(2, c));
  EXPECT_EQ(p.insert(3, c), std::optional<block_key>(1));
  EXPECT_EQ(p.insert(4, c), std::optional<block_key>(2));
}

} // namespace
} // namespace kvtier::cache
