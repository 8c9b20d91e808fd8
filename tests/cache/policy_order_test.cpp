// Exact eviction orders of each baseline policy on tiny hand-made sequences.

#include "cache/arc.hpp"
#include "cache/gap.hpp"
#include "cache/lfuda.hpp"
#include "cache/lru.hpp"
#include "cache/s3fifo.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace kvtier::cache {
namespace {

// A step: hit `key` (when it is cached) or insert it; collects the evictions.
std::vector<block_key> run(cache_policy& p, const std::vector<block_key>& keys) {
  std::vector<block_key> evicted;
  for (auto k : keys) {
    if (p.contains(k)) {
      p.on_hit(k, {});
      continue;
    }
    if (auto v = p.insert(k, {}))
      evicted.push_back(*v);
    EXPECT_LE(p.size(), p.capacity());
  }
  return evicted;
}

TEST(cache_policy, lru_evicts_least_recent) {
  lru_policy p(2);
  EXPECT_EQ(run(p, {1, 2, 1, 3, 4, 3, 1}), (std::vector<block_key>{2, 1, 4}));
  EXPECT_TRUE(p.erase(3));
  EXPECT_FALSE(p.erase(3));
  EXPECT_EQ(p.size(), 1u);
}

TEST(cache_policy, arc_adapts_to_ghost_hits) {
  arc_policy p(2);
  // 1 moves to T2 on its hit; 3 pushes 2 from T1 into B1; 2's ghost hit
  // raises p to 1 and, T1 being at p, pushes 1 out of T2; 4 then takes T2's 2.
  EXPECT_EQ(run(p, {1, 2, 1, 3, 2, 4}), (std::vector<block_key>{2, 1, 2}));
  EXPECT_EQ(p.target_t1(), 1u);
  EXPECT_TRUE(p.contains(3));
  EXPECT_TRUE(p.contains(4));
}

TEST(cache_policy, s3fifo_filters_one_hit_blocks) {
  s3fifo_policy p(4); // S holds 1 block's share, G 3 keys
  // 1 leaves S unhit; 2 was hit in S and moves to M, so 3 goes; 1 comes back
  // from the ghost straight into M after 4 leaves S; then 5 leaves S.
  EXPECT_EQ(run(p, {1, 2, 3, 4, 2, 5, 6, 1, 1, 7}), (std::vector<block_key>{1, 3, 4, 5}));
  EXPECT_TRUE(p.contains(1));
  EXPECT_TRUE(p.contains(2));
}

TEST(cache_policy, lfuda_ages_out_old_popularity) {
  lfuda_policy p(2);
  // 1 is hit twice (priority 3); 2 (1) goes and L = 1; 3 enters at 2 and
  // goes next, L = 2; 4 enters at 3, equal to 1's 3: the older 1 goes.
  EXPECT_EQ(run(p, {1, 2, 1, 1, 3, 4, 5}), (std::vector<block_key>{2, 3, 1}));
  EXPECT_EQ(p.age(), 3u);
}

TEST(cache_policy, gap_closed_arithmetic) {
  EXPECT_DOUBLE_EQ(*gap_closed(0.1, 0.1, 0.3), 0.0);
  EXPECT_DOUBLE_EQ(*gap_closed(0.3, 0.1, 0.3), 1.0);
  EXPECT_DOUBLE_EQ(*gap_closed(0.15, 0.1, 0.3), 0.25);
  EXPECT_DOUBLE_EQ(*gap_closed(0.05, 0.1, 0.3), -0.25);
  EXPECT_FALSE(gap_closed(0.2, 0.3, 0.3).has_value());
  EXPECT_FALSE(gap_closed(0.2, 0.4, 0.3).has_value());
}

} // namespace
} // namespace kvtier::cache
