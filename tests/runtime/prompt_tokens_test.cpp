// Token ids derived from trace block ids: shared trace blocks give shared
// tokens (so shared prefixes hash to the same chain), different blocks or
// requests give different ones, every id below the vocabulary.

#include "runtime/prefix_chain.hpp"
#include "runtime/prompt_tokens.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace kvtier;

TEST(prompt_tokens, shared_trace_blocks_are_shared_tokens_and_chains) {
  std::vector<uint64_t> a{10, 11, 12}, b{10, 11, 99};
  auto ta = tokens_from_external(a, 64, 170, 1000), tb = tokens_from_external(b, 64, 150, 1000);
  ASSERT_EQ(ta.size(), 170u);
  ASSERT_EQ(tb.size(), 150u);
  EXPECT_TRUE(std::equal(ta.begin(), ta.begin() + 128, tb.begin())); // blocks 10 and 11
  EXPECT_NE(std::vector<uint32_t>(ta.begin() + 128, ta.begin() + 150),
            std::vector<uint32_t>(tb.begin() + 128, tb.begin() + 150)); // 12 against 99
  EXPECT_TRUE(std::all_of(ta.begin(), ta.end(), [](uint32_t t) { return t < 1000; }));
  auto ca = chain_from_tokens(ta, 32, tenant_salt{0}), cb = chain_from_tokens(tb, 32, tenant_salt{0});
  ASSERT_EQ(ca.size(), 5u); // full blocks only: 170 / 32
  ASSERT_EQ(cb.size(), 4u);
  EXPECT_TRUE(std::equal(ca.begin(), ca.begin() + 4, cb.begin()));
  // Past the trace's ids, positions stay distinct from any shared block.
  auto longer = tokens_from_external(a, 64, 250, 1000);
  EXPECT_TRUE(std::equal(ta.begin(), ta.end(), longer.begin()));
}

TEST(prompt_tokens, requests_without_ids_share_nothing) {
  auto one = tokens_from_request_id(1, 64, 50000), two = tokens_from_request_id(2, 64, 50000);
  EXPECT_NE(one, two);
  EXPECT_EQ(one, tokens_from_request_id(1, 64, 50000));
}
