// compute_stats and ideal_prefix_reuse on hand-made traces.

#include "sim/trace.hpp"

#include <gtest/gtest.h>

using namespace kvtier::sim;

namespace {

trace_request request(double at, uint32_t in, uint32_t out, std::vector<uint64_t> ids = {}, uint64_t tenant = 0) {
  trace_request r;
  r.arrival_s = at;
  r.input_tokens = in;
  r.output_tokens = out;
  r.block_tokens = ids.empty() ? 0 : 4;
  r.block_ids = std::move(ids);
  r.tenant = tenant;
  return r;
}

} // namespace

TEST(trace_stats, percentiles_interpolate_linearly) {
  auto s = compute_stats({request(0, 1, 10), request(2, 2, 20)});
  EXPECT_EQ(s.requests, 2u);
  EXPECT_EQ(s.duration_s, 2.0);
  EXPECT_EQ(s.rate_per_s, 1.0);
  EXPECT_EQ(s.input_tokens.p50, 1.5);
  EXPECT_DOUBLE_EQ(s.input_tokens.p99, 1.99);
  EXPECT_EQ(s.input_tokens.mean, 1.5);
  EXPECT_EQ(s.output_tokens.total, 30u);
  EXPECT_EQ(s.output_tokens.min, 10u);
  EXPECT_EQ(s.output_tokens.max, 20u);

  std::vector<trace_request> hundred;
  for (uint32_t i = 1; i <= 101; ++i)
    hundred.push_back(request(0, i, 0));
  s = compute_stats(hundred);
  EXPECT_EQ(s.input_tokens.p50, 51.0);
  EXPECT_EQ(s.input_tokens.p99, 100.0);
  EXPECT_EQ(s.duration_s, 0.0);
  EXPECT_EQ(s.rate_per_s, 0.0); // no duration, no rate

  EXPECT_EQ(compute_stats({}).requests, 0u);
}

TEST(trace_stats, ideal_reuse_follows_chains_and_tenants) {
  trace t;
  t.requests = {
      request(0, 10, 1, {1, 2, 3}),    // 3 misses
      request(1, 10, 1, {1, 2, 4}),    // 1, 2 hit (8 tokens); 4 misses
      request(2, 10, 1, {5, 2, 3}),    // 2 and 3 follow another parent: misses
      request(3, 10, 1, {1, 2, 3}, 7), // another tenant: all miss
      request(4, 10, 1, {1, 2, 3}),    // all hit; the last block holds 2 tokens
      request(5, 10, 1, {}),           // no blocks, its tokens count as misses
  };
  auto reuse = ideal_prefix_reuse(t);
  EXPECT_EQ(reuse.blocks, 15u);
  EXPECT_EQ(reuse.hit_blocks, 5u);
  EXPECT_EQ(reuse.input_tokens, 60u);
  EXPECT_EQ(reuse.hit_tokens, 8u + 10u);
  EXPECT_DOUBLE_EQ(reuse.block_ratio(), 5.0 / 15.0);
  EXPECT_DOUBLE_EQ(reuse.token_ratio(), 18.0 / 60.0);
  auto s = compute_stats(t.requests);
  EXPECT_EQ(s.blocks, 15u);
  EXPECT_EQ(s.distinct_blocks, 5u + 3u); // ids 1..5 in tenant 0, 1..3 in tenant 7
  EXPECT_EQ(s.tenants, 2u);

  EXPECT_EQ(ideal_prefix_reuse(trace{}).block_ratio(), 0.0);
  EXPECT_EQ(ideal_prefix_reuse(trace{}).token_ratio(), 0.0);
}
