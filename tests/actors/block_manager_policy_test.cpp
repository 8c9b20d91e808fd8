// The block manager's eviction order under a cache policy (actors/tier_policy.hpp):
// the exact order on a small scenario, and agreement with cache/'s tier
// replay on the same accesses.

#include "actors/block_manager_state.hpp"
#include "cache/tier_replay.hpp"
#include "runtime/config_names.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

using namespace kvtier;

namespace {

constexpr uint32_t block_tokens = 4;

block_hash hash_of(uint64_t id) {
  std::vector<uint64_t> v{id};
  return chain_from_external(v, block_tokens, block_tokens, block_tokens, tenant_salt{0})[0];
}

struct outcome {
  std::vector<uint64_t> evicted; // in order
  uint64_t hits = 0;
};

// One-block requests, one at a time (admitted, grown, released) through an
// HBM of `capacity` blocks: which blocks leave, in order, and the hits.
outcome run_one_block_requests(eviction_policy policy, uint32_t capacity, const std::vector<uint64_t>& ids) {
  block_metrics metrics;
  block_manager_options o;
  o.hbm_blocks = capacity;
  o.block_tokens = block_tokens;
  o.demote_watermark = 0; // the policy holds the whole tier
  o.policy = policy;
  block_manager_state bm(o, &metrics);
  outcome out;
  std::map<uint64_t, bool> resident;
  uint64_t seq = 1;
  for (auto id : ids) {
    auto a = bm.admit(seq, {hash_of(id)}, block_tokens);
    EXPECT_EQ(a.status, admit_status::ready);
    out.hits += a.hit_blocks;
    if (a.hit_blocks == 0) {
      EXPECT_TRUE(bm.grow(seq, block_tokens));
    }
    bm.release(seq++);
    resident[id] = true;
    for (auto& [other, here] : resident)
      if (here && bm.find(tier::hbm, hash_of(other)) == invalid_block) {
        here = false;
        out.evicted.push_back(other);
      }
  }
  EXPECT_EQ(bm.check_conservation(), "");
  return out;
}

const std::vector<uint64_t> abcadeba{1, 2, 3, 1, 4, 5, 2, 1};

} // namespace

TEST(block_manager_policy, lru_evicts_the_least_recently_used) {
  auto r = run_one_block_requests(eviction_policy::lru, 3, abcadeba);
  EXPECT_EQ(r.evicted, (std::vector<uint64_t>{2, 3, 1, 4}));
  EXPECT_EQ(r.hits, 1u);
}

// S3-FIFO: A's hit while in the small queue moves it to the main queue when
// the small queue is cleaned, so B, C and D leave instead and A hits again.
TEST(block_manager_policy, s3fifo_keeps_the_block_hit_in_its_small_queue) {
  auto r = run_one_block_requests(eviction_policy::s3fifo, 3, abcadeba);
  EXPECT_EQ(r.evicted, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_EQ(r.hits, 2u);
}

// The predictor learns that blocks used before come back: the hot blocks
// 1 and 2, reused every few requests, outlive a stream of one-time blocks
// that LRU lets push them out.
TEST(block_manager_policy, predictor_keeps_reused_blocks_that_lru_loses) {
  std::vector<uint64_t> ids;
  uint64_t cold = 100;
  for (int round = 0; round < 40; ++round) {
    ids.push_back(1);
    ids.push_back(2);
    for (int i = 0; i < 3; ++i)
      ids.push_back(cold++);
  }
  auto lru = run_one_block_requests(eviction_policy::lru, 4, ids);
  auto predictor = run_one_block_requests(eviction_policy::predictor, 4, ids);
  EXPECT_EQ(lru.hits, 0u);
  EXPECT_EQ(predictor.hits, 46u);
  EXPECT_EQ(std::count(lru.evicted.begin(), lru.evicted.end(), 1u), 40);
  EXPECT_EQ(std::count(predictor.evicted.begin(), predictor.evicted.end(), 1u), 18);
  // The order itself, over the first rounds: untrained, the predictor evicts
  // as LRU does (1 and 2 among the cold blocks); once blocks used before
  // prove likelier to come back, the cold ones go first.
  std::vector<uint64_t> first(predictor.evicted.begin(), predictor.evicted.begin() + 16);
  EXPECT_EQ(first, (std::vector<uint64_t>{1, 2, 100, 101, 103, 104, 102, 105, 107, 106, 109, 108, 110, 111, 112, 113}));
}

// The same one-block accesses through cache/'s tier replay (one tier) give
// the same hits: the block manager runs the replay's policy objects, and
// with one request at a time nothing else differs. But for ARC: the block
// manager makes room before a block is written, so ARC's REPLACE runs before
// it learns that the incoming block is in a ghost list (the replay adapts
// its target first); its hits differ by that, and are pinned here too.
TEST(block_manager_policy, timed_path_and_replay_agree_on_hits) {
  std::vector<uint64_t> ids;
  uint64_t x = 12345;
  for (int i = 0; i < 400; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = (x >> 33) % 100;
    ids.push_back(r < 50 ? r % 6 : r < 80 ? 6 + r % 10 : 16 + r % 24); // hot, warm, cold
  }
  std::vector<std::vector<cache::block_key>> chains;
  for (auto id : ids)
    chains.push_back({static_cast<cache::block_key>(id)});
  const std::pair<eviction_policy, cache::policy_kind> policies[] = {
      {eviction_policy::lru, cache::policy_kind::lru},
      {eviction_policy::arc, cache::policy_kind::arc},
      {eviction_policy::s3fifo, cache::policy_kind::s3fifo},
      {eviction_policy::lfuda, cache::policy_kind::lfuda},
      {eviction_policy::predictor, cache::policy_kind::predictor}};
  std::map<std::string, uint64_t> hits;
  for (auto [policy, kind] : policies) {
    auto timed = run_one_block_requests(policy, 8, ids);
    auto replay = cache::replay_tiers(chains, 40, {8, 0, 0}, kind, cache::hierarchy_kind::exclusive);
    if (policy != eviction_policy::arc)
      EXPECT_EQ(timed.hits, replay.hit_blocks()) << name_of(policy);
    else
      EXPECT_EQ(replay.hit_blocks(), 165u);
    hits[std::string(name_of(policy))] = timed.hits;
  }
  // The policies differ here, so agreement is not an accident of one order.
  EXPECT_EQ(hits,
            (std::map<std::string, uint64_t>{
                {"arc", 171}, {"lfuda", 181}, {"lru", 152}, {"predictor", 169}, {"s3fifo", 192}}));
}
