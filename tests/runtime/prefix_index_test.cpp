#include "runtime/prefix_index.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>
#include <vector>

using namespace kvtier;

TEST(prefix_index, insert_find_erase) {
  prefix_index idx(8);
  block_hash a{1, 2}, b{3, 4};
  EXPECT_EQ(idx.find(a), invalid_block);
  idx.insert(a, block_id{5});
  idx.insert(b, block_id{6});
  EXPECT_EQ(idx.find(a), block_id{5});
  EXPECT_EQ(idx.size(), 2u);
  idx.insert(a, block_id{7});
  EXPECT_EQ(idx.find(a), block_id{7});
  EXPECT_EQ(idx.size(), 2u);
  EXPECT_TRUE(idx.erase(a));
  EXPECT_FALSE(idx.erase(a));
  EXPECT_EQ(idx.find(a), invalid_block);
  EXPECT_EQ(idx.find(b), block_id{6});
}

TEST(prefix_index, colliding_buckets_survive_erase) {
  // Same low bits: one probe run; erasing the middle must keep the rest reachable.
  prefix_index idx(8);
  block_hash x{0x10, 1}, y{0x20, 2}, z{0x30, 3};
  idx.insert(x, block_id{1});
  idx.insert(y, block_id{2});
  idx.insert(z, block_id{3});
  EXPECT_TRUE(idx.erase(y));
  EXPECT_EQ(idx.find(x), block_id{1});
  EXPECT_EQ(idx.find(z), block_id{3});
}

TEST(prefix_index, matches_a_reference_map_under_churn) {
  prefix_index idx(1000);
  std::unordered_map<block_hash, uint32_t> ref;
  std::mt19937_64 rng(42);
  std::vector<block_hash> keys;
  for (int step = 0; step < 200'000; ++step) {
    bool do_insert = ref.size() < 900 && (keys.empty() || rng() % 3 != 0);
    if (do_insert) {
      block_hash k{rng() | 1, rng()};
      auto v = static_cast<uint32_t>(rng() % 1000);
      idx.insert(k, block_id{v});
      ref[k] = v;
      keys.push_back(k);
    } else {
      size_t i = rng() % keys.size();
      auto k = keys[i];
      keys[i] = keys.back();
      keys.pop_back();
      EXPECT_EQ(idx.erase(k), ref.erase(k) == 1);
    }
  }
  EXPECT_EQ(idx.size(), ref.size());
  for (auto& [k, v] : ref)
    EXPECT_EQ(idx.find(k), block_id{v});
}

TEST(prefix_index, longest_prefix_and_tenant_isolation) {
  prefix_index idx(16);
  std::vector<uint32_t> t0{1, 2}, t1{3, 4}, t2{5, 6};
  tenant_salt alice{100}, bob{200};
  std::vector<block_hash> chain_a;
  block_hash p{};
  for (auto* t : {&t0, &t1, &t2}) {
    p = hash_block(p, *t, alice);
    chain_a.push_back(p);
  }
  idx.insert(chain_a[0], block_id{0});
  idx.insert(chain_a[1], block_id{1});
  EXPECT_EQ(idx.longest_prefix(chain_a), 2u);
  // Bob sends the same tokens under another salt: no hit.
  std::vector<block_hash> chain_b;
  p = {};
  for (auto* t : {&t0, &t1, &t2}) {
    p = hash_block(p, *t, bob);
    chain_b.push_back(p);
  }
  EXPECT_EQ(idx.longest_prefix(chain_b), 0u);
  // A second request of Alice's shares the prefix.
  std::vector<block_hash> chain_a2{hash_block({}, t0, alice), hash_block(hash_block({}, t0, alice), t1, alice)};
  EXPECT_EQ(idx.longest_prefix(chain_a2), 2u);
}
