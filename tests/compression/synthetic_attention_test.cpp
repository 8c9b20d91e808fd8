#include "compression/synthetic_attention.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

using namespace kvtier::compression;

namespace {
synthetic_config small(uint32_t needles, bool visible) {
  synthetic_config c;
  c.tokens = 160;
  c.future_queries = 8;
  c.head_dim = 32;
  c.group = 2;
  c.needles = needles;
  c.needle_visible = visible;
  return c;
}
} // namespace

TEST(synthetic_attention, deterministic_in_seed_layer_and_head) {
  auto a = generate_head(small(0, true), 0, 1);
  auto b = generate_head(small(0, true), 0, 1);
  auto c = generate_head(small(0, true), 1, 1);
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_EQ(a.future_queries, b.future_queries);
  EXPECT_NE(a.keys, c.keys);
}

TEST(synthetic_attention, rows_are_causal_distributions) {
  auto h = generate_head(small(0, true), 0, 0);
  auto p = h.prompt_attention();
  ASSERT_EQ(p.queries(), 160u);
  for (uint32_t hh = 0; hh < p.group; ++hh)
    for (uint32_t q : {0u, 5u, 159u}) {
      auto row = p.row(hh, q);
      double sum = std::accumulate(row.begin(), row.end(), 0.0);
      EXPECT_NEAR(sum, 1.0, 1e-5);
      for (uint32_t j = q + 1; j < row.size(); ++j)
        ASSERT_EQ(row[j], 0.0f);
    }
}

TEST(synthetic_attention, sinks_draw_attention) {
  auto f = generate_head(small(0, true), 0, 0).future_attention();
  double sink = 0;
  for (uint32_t q = 0; q < f.queries(); ++q)
    for (uint32_t j = 0; j < 4; ++j)
      sink += f.row(0, q)[j];
  EXPECT_GT(sink / f.queries(), 0.2); // 4 of 160 tokens hold over a fifth of the mass
}

TEST(synthetic_attention, visible_questions_attend_their_needle) {
  auto h = generate_head(small(2, true), 0, 0);
  ASSERT_EQ(h.needle_pos.size(), 2u);
  for (uint32_t p : h.needle_pos) {
    EXPECT_GE(p, 4u);
    EXPECT_LT(p, 160u - 64u);
  }
  auto prompt = h.prompt_attention();
  // The last 2 * 4 prompt queries are questions; each puts a large share of its mass on one needle.
  for (uint32_t q = 152; q < 160; ++q) {
    auto row = prompt.row(0, q);
    EXPECT_GT(row[h.needle_pos[0]] + row[h.needle_pos[1]], 0.4f) << q;
  }
  EXPECT_EQ(h.retrieval.size(), 4u); // 2 needles x 2 future retrieval queries
}

TEST(synthetic_attention, hidden_questions_leave_the_prompt_blind) {
  auto h = generate_head(small(2, false), 0, 0);
  auto prompt = h.prompt_attention();
  auto row = prompt.row(0, 159);
  EXPECT_LT(row[h.needle_pos[0]] + row[h.needle_pos[1]], 0.1f);
  auto future = h.future_attention();
  auto last = future.row(0, future.queries() - 1);
  EXPECT_GT(last[h.needle_pos[0]] + last[h.needle_pos[1]], 0.5f);
}

TEST(synthetic_attention, high_entropy_is_nearly_flat) {
  auto c = small(0, true);
  c.regime = "high_entropy";
  auto f = generate_head(c, 0, 0).future_attention();
  auto row = f.row(0, 0);
  float top = *std::max_element(row.begin(), row.end());
  EXPECT_LT(top, 5.0f / 160); // no token gets more than 5x the uniform share
}
