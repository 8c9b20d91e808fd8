#include "runtime/block_hash.hpp"

#include <gtest/gtest.h>

#include <unordered_set>
#include <vector>

using namespace kvtier;

TEST(block_hash, chained_and_deterministic) {
  std::vector<uint32_t> a{1, 2, 3, 4}, b{5, 6, 7, 8};
  auto h1 = hash_block({}, a, {});
  auto h2 = hash_block(h1, b, {});
  EXPECT_EQ(h1, hash_block({}, a, {}));
  EXPECT_EQ(h2, hash_block(h1, b, {}));
  EXPECT_NE(h2, hash_block({}, b, {})); // same tokens, different prefix
  EXPECT_FALSE(h1.empty());
}

TEST(block_hash, tenant_salt_separates) {
  std::vector<uint32_t> a{1, 2, 3, 4};
  EXPECT_NE(hash_block({}, a, tenant_salt{1}), hash_block({}, a, tenant_salt{2}));
  EXPECT_EQ(hash_block({}, a, tenant_salt{7}), hash_block({}, a, tenant_salt{7}));
}

TEST(block_hash, external_ids_chain_like_tokens) {
  auto r = hash_external_block({}, 0, {});
  auto c = hash_external_block(r, 14, {});
  EXPECT_EQ(c, hash_external_block(hash_external_block({}, 0, {}), 14, {}));
  EXPECT_NE(c, hash_external_block({}, 14, {}));
  std::vector<uint32_t> two{0, 0};
  EXPECT_NE(r, hash_block({}, two, {}));
}

TEST(block_hash, no_collisions_in_a_long_chain) {
  std::unordered_set<block_hash> seen;
  block_hash parent{};
  std::vector<uint32_t> tokens(16);
  for (uint32_t i = 0; i < 100'000; ++i) {
    tokens[0] = i;
    parent = hash_block(parent, tokens, {});
    EXPECT_TRUE(seen.insert(parent).second);
  }
}

TEST(block_hash, long_blocks_stream) {
  std::vector<uint32_t> big(1000, 3);
  auto h = hash_block({}, big, {});
  big[999] = 4;
  EXPECT_NE(h, hash_block({}, big, {}));
}
