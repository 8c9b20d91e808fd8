// The router's decisions on hand-made chains and loads, one router at a time.

#include "sim/cluster_router.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

std::vector<block_hash> chain(std::initializer_list<uint64_t> ids) {
  std::vector<block_hash> c;
  for (auto id : ids)
    c.push_back({id, 1});
  return c;
}

} // namespace

TEST(cluster_router, round_robin_takes_the_pool_in_turn) {
  cluster_router r(router_kind::round_robin, 0, 4, {2, 3}, 100);
  std::vector<uint64_t> load{0, 0, 9, 9};
  std::vector<uint32_t> got;
  for (int i = 0; i < 5; ++i)
    got.push_back(r.route({}, load));
  EXPECT_EQ(got, (std::vector<uint32_t>{2, 3, 2, 3, 2}));
}

TEST(cluster_router, least_loaded_takes_the_fewest_outstanding_lowest_index_on_ties) {
  cluster_router r(router_kind::least_loaded, 0, 3, {0, 1, 2}, 100);
  EXPECT_EQ(r.route({}, std::vector<uint64_t>{3, 1, 1}), 1u);
  EXPECT_EQ(r.route({}, std::vector<uint64_t>{0, 0, 0}), 0u);
  EXPECT_EQ(r.route({}, std::vector<uint64_t>{5, 4, 2}), 2u);
}

TEST(cluster_router, cache_aware_follows_the_prefix_within_the_load_slack) {
  cluster_router r(router_kind::cache_aware, 1, 3, {0, 1, 2}, 100);
  auto a = chain({1, 2, 3});
  // Nothing held anywhere: the least loaded, then the lowest index.
  EXPECT_EQ(r.route(a, std::vector<uint64_t>{0, 0, 0}), 0u);
  r.remember(0, a);
  // Replica 0 holds two leading blocks and is within the slack (1 <= 0 + 1).
  auto b = chain({1, 2, 4});
  EXPECT_EQ(r.route(b, std::vector<uint64_t>{1, 0, 0}), 0u);
  r.remember(0, b);
  // Now replica 0 is two requests deeper than the least loaded: the prefix loses.
  auto c = chain({1, 2, 5});
  EXPECT_EQ(r.route(c, std::vector<uint64_t>{2, 0, 0}), 1u);
  r.remember(1, c);
  // Replica 1 holds the prefix now; replica 0 is out of the slack, replica 2 is idle.
  EXPECT_EQ(r.route(chain({1, 2, 6}), std::vector<uint64_t>{2, 1, 0}), 1u);
  // No prefix anywhere: the lower load among candidates.
  EXPECT_EQ(r.route(chain({9}), std::vector<uint64_t>{2, 1, 0}), 2u);
  EXPECT_EQ(r.held_prefix(0, chain({1, 2, 4, 7})), 3u);
  EXPECT_EQ(r.held_prefix(2, chain({1})), 0u);
}

TEST(cluster_router, a_view_forgets_its_least_recent_blocks) {
  cluster_router r(router_kind::cache_aware, 0, 2, {0, 1}, 3);
  r.remember(0, chain({1, 2}));
  r.remember(0, chain({7, 8})); // 1 is out: the view holds 3 blocks
  EXPECT_EQ(r.held_prefix(0, chain({1, 2})), 0u);
  EXPECT_EQ(r.held_prefix(0, chain({7, 8})), 2u);
  EXPECT_EQ(r.route(chain({1, 2}), std::vector<uint64_t>{0, 0}), 0u); // a tie at prefix 0: lowest index
}

TEST(hash_lru, a_chain_insert_is_the_inserts_one_at_a_time) {
  // Capacity 5 over chains of 3 to 20 hashes with repeats: evictions in the
  // middle of a chain, hashes held and touched again, and lookahead past the end.
  hash_lru whole(5), single(5);
  std::vector<std::vector<block_hash>> chains{
      chain({1, 2, 3}), chain({4, 1, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), chain({13, 2, 14, 15}),
      chain({20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 13})};
  for (const auto& c : chains) {
    size_t added = 0;
    for (const auto& h : c)
      added += single.insert(h) ? 1 : 0;
    EXPECT_EQ(whole.insert(std::span<const block_hash>(c)), added);
  }
  EXPECT_EQ(whole.evictions(), single.evictions());
  EXPECT_EQ(whole.evictions(), 31u); // 36 inserts of a hash not held, into 5 slots
  for (uint64_t id = 0; id < 40; ++id)
    EXPECT_EQ(whole.contains({id, 1}), single.contains({id, 1})) << id;
  EXPECT_EQ(whole.prefix(chain({35, 36, 37, 38, 13, 1})), 5u);
  EXPECT_EQ(single.prefix(chain({35, 36, 37, 38, 13, 1})), 5u);
}
