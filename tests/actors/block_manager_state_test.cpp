#include "actors/block_manager_state.hpp"
#include "actors/graph.hpp"
#include "runtime/error.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>

using namespace kvtier;

namespace {

std::vector<block_hash> chain_of(std::initializer_list<uint64_t> ids, uint64_t salt = 0) {
  std::vector<uint64_t> v(ids);
  return chain_from_external(v, 4, 4 * v.size(), 4, tenant_salt{salt});
}

std::vector<uint32_t> slots_of(const std::vector<block_id>& v) {
  std::vector<uint32_t> out;
  for (auto id : v)
    out.push_back(index_of(id));
  return out;
}

struct block_manager_test : ::testing::Test {
  block_metrics metrics;
  block_manager_options options() {
    block_manager_options o;
    o.hbm_blocks = 6;
    o.dram_blocks = 4;
    o.nvme_blocks = 0;
    o.block_tokens = 4;
    o.demote_watermark = 1.0; // consider the whole free queue
    return o;
  }
  void settle(block_manager_state& bm) {
    for (auto b = bm.take_transfers(); !b.empty(); b = bm.take_transfers())
      for (auto& batch : b)
        bm.on_transfer_done(batch.tag, true);
  }
};

} // namespace

TEST_F(block_manager_test, prefix_hit_in_hbm_after_release) {
  block_manager_state bm(options(), &metrics);
  auto chain = chain_of({10, 11});
  auto a = bm.admit(1, chain, 8);
  EXPECT_EQ(a.status, admit_status::ready);
  EXPECT_EQ(a.hit_blocks, 0u);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  auto b = bm.admit(2, chain, 8);
  EXPECT_EQ(b.status, admit_status::ready);
  EXPECT_EQ(b.hit_blocks, 2u);
  EXPECT_EQ(b.hit_tokens, 8u);
  EXPECT_EQ(b.hits_by_tier[index_of(tier::hbm)], 2u);
  EXPECT_EQ(bm.tokens(2), 8u);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 4u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, tenants_never_share) {
  block_manager_state bm(options(), &metrics);
  ASSERT_EQ(bm.admit(1, chain_of({10, 11}, 1), 8).status, admit_status::ready);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  EXPECT_EQ(bm.admit(2, chain_of({10, 11}, 2), 8).hit_blocks, 0u);
  EXPECT_EQ(bm.admit(3, chain_of({10, 11}, 1), 8).hit_blocks, 2u);
}

TEST_F(block_manager_test, demotes_ahead_then_promotes_a_dram_hit) {
  block_manager_state bm(options(), &metrics);
  auto chain = chain_of({10, 11});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8)); // HBM slots 0, 1
  bm.release(1);              // free queue: 2 3 4 5 1 0
  bm.demote_ahead();
  auto batches = bm.take_transfers();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].from, tier::hbm);
  EXPECT_EQ(batches[0].to, tier::dram);
  EXPECT_TRUE(batches[0].background); // demote-ahead: nothing waits on it
  ASSERT_EQ(batches[0].moves.size(), 2u);
  // The walk takes the chain's tail first (LRU first); the batch goes out
  // head first, into ascending DRAM slots from the top (docs/slot_placement.md).
  EXPECT_EQ(batches[0].moves[0].from_slot, 0u);
  EXPECT_EQ(batches[0].moves[0].to_slot, 2u);
  EXPECT_EQ(batches[0].moves[1].from_slot, 1u);
  EXPECT_EQ(batches[0].moves[1].to_slot, 3u);
  EXPECT_EQ(bm.check_conservation(), "");
  bm.on_transfer_done(batches[0].tag, true);
  EXPECT_EQ(metrics.tiers[index_of(tier::hbm)].demotions, 2u);
  // Backed copies join the clean list behind the empty slots: allocation takes
  // empty slots first, then these, and sole copies (the dirty list) last.
  EXPECT_EQ(slots_of(bm.pool(tier::hbm).free_queue_order()), (std::vector<uint32_t>{2, 3, 4, 5, 1, 0}));
  EXPECT_EQ(bm.pool(tier::hbm).first_dirty(), invalid_block);

  // Another request fills HBM and evicts both (not lost: DRAM holds them).
  bm.admit(2, chain_of({20, 21, 22, 23, 24, 25}), 24);
  ASSERT_TRUE(bm.grow(2, 24));
  EXPECT_EQ(metrics.tiers[index_of(tier::hbm)].evictions, 2u);
  EXPECT_EQ(metrics.tiers[index_of(tier::hbm)].evictions_lost, 0u);
  bm.release(2);

  // The first prompt again: found in DRAM, brought up, not readable until it lands.
  auto r = bm.admit(3, chain, 8);
  EXPECT_EQ(r.status, admit_status::loading);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::dram)], 2u);
  EXPECT_FALSE(bm.ready(3));
  auto up = bm.take_transfers();
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(up[0].from, tier::dram);
  EXPECT_EQ(up[0].to, tier::hbm);
  EXPECT_FALSE(up[0].background); // a sequence waits on the promotion
  EXPECT_EQ(up[0].moves.size(), 2u);
  for (auto m : up[0].moves)
    EXPECT_EQ(bm.pool(tier::hbm).state(block_id{m.to_slot}), block_state::moving);
  // A second reader of the same prefix waits for the same moves.
  auto r2 = bm.admit(4, chain, 8);
  EXPECT_EQ(r2.status, admit_status::loading);
  EXPECT_EQ(r2.hits_by_tier[index_of(tier::hbm)], 2u);
  EXPECT_TRUE(bm.take_transfers().empty());
  EXPECT_EQ(bm.check_conservation(), "");
  auto ready = bm.on_transfer_done(up[0].tag, true);
  EXPECT_EQ(ready, (std::vector<uint64_t>{3, 4}));
  EXPECT_TRUE(bm.ready(3));
  EXPECT_EQ(bm.tokens(3), 8u);
  EXPECT_EQ(metrics.reads_while_moving, 0u);
  bm.release(3);
  bm.release(4);
  settle(bm);
  EXPECT_EQ(bm.check_conservation(), "");
  EXPECT_EQ(metrics.tiers[0].allocated, metrics.tiers[0].freed);
}

TEST_F(block_manager_test, no_room_changes_nothing) {
  auto o = options();
  o.hbm_blocks = 2;
  block_manager_state bm(o, &metrics);
  bm.admit(1, chain_of({1}), 4);
  ASSERT_TRUE(bm.grow(1, 4));
  EXPECT_FALSE(bm.grow(1, 8)); // needs 2 more, 1 free
  EXPECT_EQ(bm.tokens(1), 4u);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 1u);
  EXPECT_EQ(metrics.tiers[0].allocation_failures, 1u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, swap_out_and_back_in) {
  block_manager_state bm(options(), &metrics);
  bm.admit(1, chain_of({1, 2}), 8);
  ASSERT_TRUE(bm.grow(1, 10)); // 3 blocks, the last one unhashed (decode tokens)
  EXPECT_EQ(bm.preempt(1, preempt_mode::swap), preempt_mode::swap);
  EXPECT_TRUE(bm.swapped(1));
  EXPECT_EQ(bm.swap_in(1), admit_status::no_room); // still on its way out
  auto out = bm.take_transfers();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].moves.size(), 3u);
  EXPECT_FALSE(out[0].background); // swap-out: the scheduler waits for the room
  EXPECT_EQ(bm.check_conservation(), "");
  auto ready = bm.on_transfer_done(out[0].tag, true);
  EXPECT_EQ(ready, (std::vector<uint64_t>{1})); // settled in DRAM
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  EXPECT_EQ(bm.free_blocks(tier::dram), 1u);
  EXPECT_EQ(bm.swap_in(1), admit_status::loading); // hashed blocks still cached in HBM, the tail comes up
  // 2 prefix blocks revived from HBM's cache; the unhashed tail is copied.
  auto in = bm.take_transfers();
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0].moves.size(), 1u);
  EXPECT_FALSE(bm.ready(1));
  bm.on_transfer_done(in[0].tag, true);
  EXPECT_TRUE(bm.ready(1));
  EXPECT_EQ(bm.tokens(1), 10u);
  EXPECT_EQ(bm.hbm_block_count(1), 3u);
  EXPECT_EQ(metrics.swapped_out_blocks, 3u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, swap_falls_back_to_recompute_without_dram_room) {
  auto o = options();
  o.dram_blocks = 1;
  block_manager_state bm(o, &metrics);
  bm.admit(1, chain_of({1, 2}), 8);
  ASSERT_TRUE(bm.grow(1, 8));
  EXPECT_EQ(bm.preempt(1, preempt_mode::swap), preempt_mode::recompute);
  EXPECT_FALSE(bm.registered(1));
  // Recompute keeps the hashed prefix cached: readmission hits it.
  EXPECT_EQ(bm.admit(2, chain_of({1, 2}), 8).hit_blocks, 2u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, failed_load_truncates_to_what_arrived) {
  block_manager_state bm(options(), &metrics);
  auto chain = chain_of({7, 8});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm);
  bm.admit(2, chain_of({30, 31, 32, 33, 34, 35}), 24);
  ASSERT_TRUE(bm.grow(2, 24)); // evicts both from HBM
  bm.release(2);
  auto r = bm.admit(3, chain, 8);
  ASSERT_EQ(r.status, admit_status::loading);
  auto up = bm.take_transfers();
  ASSERT_EQ(up.size(), 1u);
  auto ready = bm.on_transfer_done(up[0].tag, false); // bytes never arrived
  EXPECT_EQ(ready, (std::vector<uint64_t>{3}));
  EXPECT_EQ(bm.tokens(3), 0u); // recompute from the start
  EXPECT_EQ(metrics.failed_transfers, 1u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, compaction_removes_chosen_blocks_and_frees_their_slots) {
  block_manager_state bm(options(), &metrics);
  bm.admit(1, chain_of({1, 2, 3, 4, 5}), 18);
  ASSERT_TRUE(bm.grow(1, 18)); // 5 blocks, the last holding 2 tokens
  auto slots = bm.hbm_slots(1);
  ASSERT_EQ(slots.size(), 5u);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 1u);
  const std::vector<uint32_t> drop{1, 3};
  auto done = bm.compact(1, drop, std::vector<uint32_t>{slots[1], slots[3]});
  ASSERT_TRUE(done.applied);
  EXPECT_EQ(done.dropped, (std::vector<uint32_t>{slots[1], slots[3]}));
  EXPECT_EQ(done.freed, (std::vector<uint32_t>{slots[1], slots[3]}));
  EXPECT_EQ(done.dropped_tokens, 8u);
  EXPECT_EQ(bm.hbm_slots(1), (std::vector<uint32_t>{slots[0], slots[2], slots[4]}));
  EXPECT_EQ(bm.free_blocks(tier::hbm), 3u);
  EXPECT_EQ(bm.tokens(1), 18u); // positions stay
  EXPECT_EQ(bm.dropped_tokens(1), 8u);
  // New tokens go on filling the last block, then a new one.
  ASSERT_TRUE(bm.grow(1, 3));
  EXPECT_EQ(bm.tokens(1), 21u);
  EXPECT_EQ(bm.hbm_block_count(1), 4u);
  // A choice made on the table before: the slots no longer match, nothing changes.
  auto stale = bm.compact(1, std::vector<uint32_t>{1}, std::vector<uint32_t>{slots[1]});
  EXPECT_FALSE(stale.applied);
  EXPECT_EQ(bm.hbm_block_count(1), 4u);
  bm.release(1);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  EXPECT_EQ(bm.check_conservation(), "");
}

// A step carries what changed of a table: everything first, then nothing or
// the appended block; a copy-on-write tail from its entry on; a compaction
// from the first entry removed; a swap the whole table again.
TEST_F(block_manager_test, table_updates_carry_only_what_changed) {
  auto o = options();
  o.hbm_blocks = 12;
  block_manager_state bm(o, &metrics);
  bm.admit(1, chain_of({1, 2, 3}), 10);
  ASSERT_TRUE(bm.grow(1, 10)); // 3 blocks, the last 2 tokens: hashed (it ends the prompt)
  auto first = bm.take_table_update(1);
  EXPECT_EQ(first.from, 0u);
  EXPECT_EQ(first.entries, bm.hbm_slots(1));
  ASSERT_EQ(first.entries.size(), 3u);
  EXPECT_TRUE(bm.take_table_update(1).entries.empty());
  // The hashed partial tail is copied before the decode writes into it.
  ASSERT_TRUE(bm.grow(1, 1));
  auto cow = bm.take_table_update(1);
  EXPECT_EQ(cow.from, 2u);
  ASSERT_EQ(cow.entries.size(), 1u);
  EXPECT_NE(cow.entries[0], first.entries[2]);
  EXPECT_EQ(cow.entries[0], bm.hbm_slots(1)[2]);
  bm.take_copies();
  // Within the block: nothing; into a new block: that block alone.
  ASSERT_TRUE(bm.grow(1, 1));
  auto none = bm.take_table_update(1);
  EXPECT_EQ(none.from, 3u);
  EXPECT_TRUE(none.entries.empty());
  ASSERT_TRUE(bm.grow(1, 2)); // 14 tokens: a fourth block
  auto appended = bm.take_table_update(1);
  EXPECT_EQ(appended.from, 3u);
  EXPECT_EQ(appended.entries, std::vector<uint32_t>{bm.hbm_slots(1)[3]});
  // Compaction: entries from the first removed one shift down.
  auto before = bm.hbm_slots(1);
  ASSERT_TRUE(bm.compact(1, std::vector<uint32_t>{1}).applied);
  auto compacted = bm.take_table_update(1);
  EXPECT_EQ(compacted.from, 1u);
  EXPECT_EQ(compacted.entries, (std::vector<uint32_t>{before[2], before[3]}));
  // Swapped out and in: new slots, the whole table again.
  ASSERT_EQ(bm.preempt(1, preempt_mode::swap), preempt_mode::swap);
  settle(bm);
  ASSERT_EQ(bm.swap_in(1), admit_status::loading);
  settle(bm);
  auto back = bm.take_table_update(1);
  EXPECT_EQ(back.from, 0u);
  EXPECT_EQ(back.entries, bm.hbm_slots(1));
  EXPECT_EQ(back.entries.size(), 3u);
  bm.release(1);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, compaction_unreferences_a_shared_prefix_block_without_freeing_it) {
  block_manager_state bm(options(), &metrics);
  auto chain = chain_of({7, 8, 9});
  bm.admit(1, chain, 12);
  ASSERT_TRUE(bm.grow(1, 12));
  auto a = bm.admit(2, chain_of({7, 8, 9}), 12); // the whole prompt from sequence 1
  ASSERT_EQ(a.hit_blocks, 3u);
  ASSERT_TRUE(bm.grow(2, 1)); // decoding: a block of its own
  auto shared = bm.hbm_slots(1);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 2u);
  auto done = bm.compact(2, std::vector<uint32_t>{0, 1});
  ASSERT_TRUE(done.applied);
  EXPECT_EQ(done.dropped, (std::vector<uint32_t>{shared[0], shared[1]}));
  EXPECT_TRUE(done.freed.empty()); // sequence 1 still holds them
  EXPECT_EQ(bm.free_blocks(tier::hbm), 2u);
  EXPECT_EQ(bm.hbm_slots(1), shared);
  EXPECT_EQ(bm.pool(tier::hbm).ref_count(block_id{shared[0]}), 1u);
  // The last owner finishing frees them as usual; the rest stays consistent.
  bm.release(1);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 4u);
  bm.release(2);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  EXPECT_EQ(bm.check_conservation(), "");
}

// A crafted mass pattern through each policy's choice and the block manager:
// 150 tokens in blocks of 16 (10 blocks, the last holding 6), keep ratio 0.5
// (75 tokens: 5 blocks). Protected: block 0 (the sinks) and blocks 7..9 (the
// last 32 tokens), so one more block is kept: SnapKV takes the largest raw
// mass (block 2), H2O the largest mass per query that could see the block
// (block 4: 2.5 over 86 queries beats 3.0 over 118), StreamingLLM the newest
// (block 6). The rest go, and exactly their slots are freed.
TEST(compaction_choice, each_policy_drops_the_expected_blocks_and_frees_their_slots) {
  auto cfg = parse_config("[cache]\nblock_tokens = 16\n[tiers.hbm]\ncapacity = \"64MiB\"\n[compression]\npolicy = "
                          "\"h2o\"\nkeep_ratio = 0.5\n",
                          "choice.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  // 10 blocks of 16: 150 tokens (the last holds 6). Budget: 75 tokens = 5 blocks.
  // Protected: block 0 (sinks), blocks 7..9 (the last 32 tokens: positions 118..149).
  const uint64_t tokens = 150;
  //                            0    1    2    3    4    5    6    7    8    9
  const std::vector<float> mass{4.0, 0.5, 3.0, 0.1, 2.5, 0.2, 0.3, 0.4, 0.6, 1.0};
  struct expectation {
    compression_policy policy;
    uint32_t queries;
    std::vector<uint32_t> dropped;
  };
  const std::vector<expectation> cases{
      {compression_policy::snapkv, 32, {1, 3, 4, 5, 6}},
      {compression_policy::h2o, 140, {1, 2, 3, 5, 6}}, // queries at entries 10..149
      {compression_policy::streaming_llm, 1, {1, 2, 3, 4, 5}},
  };
  for (const auto& c : cases) {
    auto policy_cfg = *cfg;
    policy_cfg.compression.policy = c.policy;
    const auto name = static_cast<int>(c.policy);
    block_manager_options o;
    o.hbm_blocks = 12;
    o.block_tokens = 16;
    block_metrics metrics;
    block_manager_state bm(o, &metrics);
    bm.admit(1, {}, tokens);
    ASSERT_TRUE(bm.grow(1, static_cast<uint32_t>(tokens)));
    auto slots = bm.hbm_slots(1);
    prefill_stats stats{1, tokens, 0, mass, mass, c.queries, slots};
    auto order = choose_compaction(stats, policy_cfg);
    EXPECT_EQ(order.indices, c.dropped) << name;
    std::vector<uint32_t> want_slots;
    double lost = 0;
    for (auto i : c.dropped)
      want_slots.push_back(slots[i]), lost += mass[i];
    EXPECT_EQ(order.slots, want_slots) << name;
    EXPECT_NEAR(order.mass_kept, (12.6 - lost) / 12.6, 1e-5) << name;
    auto done = bm.compact(1, order.indices, order.slots);
    ASSERT_TRUE(done.applied) << name;
    EXPECT_EQ(done.freed, want_slots) << name;
    EXPECT_EQ(bm.free_blocks(tier::hbm), 2u + c.dropped.size()) << name;
    EXPECT_EQ(bm.hbm_block_count(1), 5u) << name;
    EXPECT_EQ(bm.tokens(1), tokens) << name;
    EXPECT_EQ(bm.check_conservation(), "") << name;
  }
}

TEST_F(block_manager_test, nvme_hits_take_two_hops) {
  auto o = options();
  o.nvme_blocks = 8;
  o.dram_blocks = 2;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({5, 6});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm); // HBM -> DRAM
  bm.demote_ahead();
  settle(bm); // DRAM -> NVMe
  EXPECT_NE(bm.find(tier::nvme, chain[0]), invalid_block);
  // Push the prefix out of HBM and DRAM.
  bm.admit(2, chain_of({40, 41, 42, 43, 44, 45}), 24);
  ASSERT_TRUE(bm.grow(2, 24));
  bm.release(2);
  bm.demote_ahead();
  settle(bm);
  ASSERT_EQ(bm.find(tier::hbm, chain[0]), invalid_block);
  ASSERT_EQ(bm.find(tier::dram, chain[0]), invalid_block);
  auto r = bm.admit(3, chain, 8);
  EXPECT_EQ(r.status, admit_status::loading);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::nvme)], 2u);
  auto first = bm.take_transfers();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].from, tier::nvme);
  EXPECT_EQ(first[0].to, tier::dram);
  EXPECT_TRUE(bm.on_transfer_done(first[0].tag, true).empty());
  auto second = bm.take_transfers();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].from, tier::dram);
  EXPECT_EQ(second[0].to, tier::hbm);
  EXPECT_EQ(bm.on_transfer_done(second[0].tag, true), (std::vector<uint64_t>{3}));
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, failed_first_hop_of_an_nvme_hit_recomputes) {
  auto o = options();
  o.nvme_blocks = 8;
  o.dram_blocks = 2;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({5, 6});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm); // HBM -> DRAM
  bm.demote_ahead();
  settle(bm); // DRAM -> NVMe
  bm.admit(2, chain_of({40, 41, 42, 43, 44, 45}), 24);
  ASSERT_TRUE(bm.grow(2, 24));
  bm.release(2);
  bm.demote_ahead();
  settle(bm);
  ASSERT_EQ(bm.find(tier::hbm, chain[0]), invalid_block);
  ASSERT_EQ(bm.find(tier::dram, chain[0]), invalid_block);
  auto r = bm.admit(3, chain, 8);
  ASSERT_EQ(r.hits_by_tier[index_of(tier::nvme)], 2u);
  auto first = bm.take_transfers();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(first[0].from, tier::nvme);
  // The NVMe read fails: nothing goes on to HBM, the sequence recomputes.
  EXPECT_EQ(bm.on_transfer_done(first[0].tag, false), (std::vector<uint64_t>{3}));
  EXPECT_TRUE(bm.take_transfers().empty());
  EXPECT_EQ(bm.tokens(3), 0u);
  EXPECT_EQ(metrics.corrupted_reads, 2u);
  EXPECT_EQ(bm.find(tier::dram, chain[0]), invalid_block);
  EXPECT_EQ(bm.find(tier::hbm, chain[0]), invalid_block);
  EXPECT_EQ(bm.check_conservation(), "");
  bm.release(3);
  EXPECT_EQ(bm.check_conservation(), "");
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  EXPECT_EQ(bm.free_blocks(tier::dram), 2u);
}

TEST_F(block_manager_test, adopted_nvme_blocks_are_found_and_promoted) {
  auto o = options();
  o.nvme_blocks = 8;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({1, 2, 3, 4});
  // The first three blocks of the prompt survived a restart; two entries
  // are unusable (a slot past the end, a hash already adopted).
  std::vector<recovered_block> recovered{{5, chain[0]}, {2, chain[1]}, {9, chain[3]}, {7, chain[2]}, {3, chain[0]}};
  EXPECT_EQ(bm.adopt_nvme_blocks(recovered), 3u);
  EXPECT_EQ(bm.find(tier::nvme, chain[0]), block_id{5});
  EXPECT_EQ(bm.find(tier::nvme, chain[1]), block_id{2});
  EXPECT_EQ(bm.find(tier::nvme, chain[2]), block_id{7});
  EXPECT_EQ(bm.find(tier::nvme, chain[3]), invalid_block);
  EXPECT_EQ(bm.free_blocks(tier::nvme), 8u); // cached, not in use
  EXPECT_EQ(metrics.tiers[index_of(tier::nvme)].allocated, 0u);
  EXPECT_EQ(bm.check_conservation(), "");

  auto r = bm.admit(1, chain, 16);
  EXPECT_EQ(r.status, admit_status::loading);
  EXPECT_EQ(r.hit_blocks, 3u);
  EXPECT_EQ(r.hit_tokens, 12u);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::nvme)], 3u);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::dram)], 0u);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::hbm)], 0u);
  EXPECT_EQ(metrics.tiers[index_of(tier::nvme)].prefix_hit_blocks, 3u);
  EXPECT_EQ(metrics.miss_blocks, 1u);

  auto first = bm.take_transfers();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].from, tier::nvme);
  EXPECT_EQ(first[0].to, tier::dram);
  EXPECT_FALSE(first[0].background);
  ASSERT_EQ(first[0].moves.size(), 3u);
  EXPECT_EQ(first[0].moves[0].from_slot, 5u);
  EXPECT_EQ(first[0].moves[1].from_slot, 2u);
  EXPECT_EQ(first[0].moves[2].from_slot, 7u);
  EXPECT_EQ(first[0].hashes, (std::vector<block_hash>{chain[0], chain[1], chain[2]}));
  EXPECT_EQ(bm.check_conservation(), "");
  EXPECT_TRUE(bm.on_transfer_done(first[0].tag, true).empty());
  auto second = bm.take_transfers();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].from, tier::dram);
  EXPECT_EQ(second[0].to, tier::hbm);
  ASSERT_EQ(second[0].moves.size(), 3u);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(second[0].moves[i].from_slot, first[0].moves[i].to_slot);
  EXPECT_EQ(bm.on_transfer_done(second[0].tag, true), (std::vector<uint64_t>{1}));
  EXPECT_EQ(metrics.tiers[index_of(tier::nvme)].promotions, 3u);
  EXPECT_EQ(metrics.tiers[index_of(tier::dram)].promotions, 3u);
  EXPECT_EQ(bm.tokens(1), 12u);
  ASSERT_TRUE(bm.grow(1, 4));
  bm.release(1);
  EXPECT_EQ(bm.check_conservation(), "");
  // The recovered copies stay cached in NVMe.
  EXPECT_EQ(bm.find(tier::nvme, chain[0]), block_id{5});
}

TEST_F(block_manager_test, adopting_without_nvme_takes_nothing) {
  block_manager_state bm(options(), &metrics);
  auto chain = chain_of({1});
  std::vector<recovered_block> recovered{{0, chain[0]}};
  EXPECT_EQ(bm.adopt_nvme_blocks(recovered), 0u);
  EXPECT_EQ(bm.admit(1, chain, 4).hit_blocks, 0u);
}

namespace {

// Tiers (of HBM, DRAM, NVMe) that hold `hash`.
int copies_of(const block_manager_state& bm, const block_hash& hash) {
  int n = 0;
  for (auto t : {tier::hbm, tier::dram, tier::nvme})
    n += bm.find(t, hash) != invalid_block ? 1 : 0; // a disabled tier finds nothing
  return n;
}

} // namespace

TEST_F(block_manager_test, exclusive_demote_ahead_copies_only_the_clean_window) {
  auto o = options();
  o.exclusive = true;
  o.demote_watermark = 0.5; // 3 of 6 HBM slots kept clean
  block_manager_state bm(o, &metrics);
  bm.admit(1, chain_of({10, 11, 12, 13}), 16);
  ASSERT_TRUE(bm.grow(1, 16)); // HBM slots 0..3
  bm.release(1);               // clean: 4 5 (empty); dirty: 3 2 1 0
  bm.demote_ahead();
  auto batches = bm.take_transfers();
  ASSERT_EQ(batches.size(), 1u);
  ASSERT_EQ(batches[0].moves.size(), 1u);
  EXPECT_EQ(batches[0].moves[0].from_slot, 3u); // the one nearest eviction
  bm.on_transfer_done(batches[0].tag, true);
  EXPECT_EQ(slots_of(bm.pool(tier::hbm).free_queue_order()), (std::vector<uint32_t>{4, 5, 3, 2, 1, 0}));
  EXPECT_EQ(bm.pool(tier::hbm).clean_count(), 3u);
  bm.demote_ahead(); // the window is clean: nothing more moves
  EXPECT_TRUE(bm.take_transfers().empty());
  EXPECT_EQ(metrics.tiers[index_of(tier::hbm)].demotions, 1u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, exclusive_promotion_frees_the_copy_below) {
  auto o = options();
  o.exclusive = true;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({10, 11});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm);
  // Pushed out of HBM by another request: each block's one copy is in DRAM.
  bm.admit(2, chain_of({20, 21, 22, 23, 24, 25}), 24);
  ASSERT_TRUE(bm.grow(2, 24));
  bm.release(2);
  for (const auto& h : chain) {
    EXPECT_EQ(bm.find(tier::hbm, h), invalid_block);
    EXPECT_NE(bm.find(tier::dram, h), invalid_block);
  }
  EXPECT_EQ(metrics.tiers[index_of(tier::hbm)].evictions_lost, 0u);
  uint32_t dram_free = bm.free_blocks(tier::dram);
  auto r = bm.admit(3, chain, 8);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::dram)], 2u);
  settle(bm);
  ASSERT_TRUE(bm.ready(3));
  // Landed: DRAM gave its copies up, emptied, first in line for reuse.
  for (const auto& h : chain) {
    EXPECT_EQ(copies_of(bm, h), 1);
    EXPECT_NE(bm.find(tier::hbm, h), invalid_block);
  }
  EXPECT_EQ(bm.free_blocks(tier::dram), dram_free);
  EXPECT_EQ(bm.pool(tier::dram).clean_count(), 4u);
  EXPECT_EQ(metrics.tiers[index_of(tier::dram)].promotions, 2u);
  bm.release(3);
  // Released HBM blocks are sole copies again: dirty, to be moved when near eviction.
  EXPECT_NE(bm.pool(tier::hbm).first_dirty(), invalid_block);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, exclusive_hbm_hit_frees_the_copy_demote_ahead_made) {
  auto o = options();
  o.exclusive = true;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({10, 11});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm); // copied down ahead of eviction, still cached in HBM
  EXPECT_EQ(copies_of(bm, chain[0]), 2);
  auto r = bm.admit(2, chain, 8);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::hbm)], 2u);
  for (const auto& h : chain) {
    EXPECT_EQ(copies_of(bm, h), 1);
    EXPECT_EQ(bm.find(tier::dram, h), invalid_block);
  }
  EXPECT_EQ(bm.free_blocks(tier::dram), 4u);
  bm.release(2);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, exclusive_nvme_hit_leaves_no_copy_below) {
  auto o = options();
  o.exclusive = true;
  o.nvme_blocks = 8;
  o.dram_blocks = 2;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({5, 6});
  bm.admit(1, chain, 8);
  ASSERT_TRUE(bm.grow(1, 8));
  bm.release(1);
  bm.demote_ahead();
  settle(bm); // HBM -> DRAM
  bm.demote_ahead();
  settle(bm); // DRAM -> NVMe
  bm.admit(2, chain_of({40, 41, 42, 43, 44, 45}), 24);
  ASSERT_TRUE(bm.grow(2, 24)); // evicts the HBM copies
  bm.release(2);
  bm.demote_ahead();
  settle(bm); // and their DRAM copies make room for the new blocks
  ASSERT_EQ(bm.find(tier::hbm, chain[0]), invalid_block);
  ASSERT_EQ(bm.find(tier::dram, chain[0]), invalid_block);
  ASSERT_NE(bm.find(tier::nvme, chain[0]), invalid_block);
  auto r = bm.admit(3, chain, 8);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::nvme)], 2u);
  settle(bm); // two hops: NVMe -> DRAM -> HBM
  ASSERT_TRUE(bm.ready(3));
  for (const auto& h : chain) {
    EXPECT_EQ(copies_of(bm, h), 1);
    EXPECT_NE(bm.find(tier::hbm, h), invalid_block);
  }
  EXPECT_EQ(metrics.tiers[index_of(tier::nvme)].promotions, 2u);
  bm.release(3);
  EXPECT_EQ(bm.check_conservation(), "");
}

namespace {

std::vector<block_hash> chain_range(uint64_t first, uint64_t count) {
  std::vector<uint64_t> v;
  for (uint64_t i = 0; i < count; ++i)
    v.push_back(first + i);
  return chain_from_external(v, 4, 4 * v.size(), 4, tenant_salt{0});
}

struct fragmented_demotion {
  transfer_batch batch;              // the second demotion into DRAM
  std::vector<uint32_t> dram_blocks; // the DRAM blocks it writes, in move order
  block_metrics metrics;
};

// Fills DRAM with one 16-block demotion, brings half of it back up (so the
// DRAM free list's LRU end is blocks 0..7, then 15, 14, ..., 8: the order the
// promotions freed them), then demotes 16 other blocks, which evict all 16.
fragmented_demotion demote_after_fragmenting(slot_placement_kind placement) {
  fragmented_demotion out;
  block_manager_options o;
  o.hbm_blocks = 32;
  o.dram_blocks = 16;
  o.block_tokens = 4;
  o.demote_watermark = 1.0;
  o.placement = placement;
  block_manager_state bm(o, &out.metrics);
  auto settle = [&] {
    for (auto b = bm.take_transfers(); !b.empty(); b = bm.take_transfers())
      for (auto& batch : b)
        bm.on_transfer_done(batch.tag, true);
  };
  auto first = chain_range(100, 16);
  bm.admit(1, first, 64);
  EXPECT_TRUE(bm.grow(1, 64));
  bm.release(1);
  bm.demote_ahead();
  settle(); // chain block k in DRAM block 15 - k
  bm.admit(2, chain_range(200, 32), 128);
  EXPECT_TRUE(bm.grow(2, 128)); // HBM evicts every block of `first`
  bm.release(2);
  auto r = bm.admit(3, std::vector<block_hash>(first.begin(), first.begin() + 8), 32);
  EXPECT_EQ(r.hits_by_tier[index_of(tier::dram)], 8u);
  settle();
  bm.release(3);
  bm.demote_ahead();
  auto batches = bm.take_transfers();
  EXPECT_EQ(batches.size(), 1u);
  if (batches.empty())
    return out;
  out.batch = batches[0];
  for (const auto& m : out.batch.moves)
    out.dram_blocks.push_back(index_of(bm.block_in(tier::dram, m.to_slot)));
  EXPECT_EQ(bm.check_conservation(), "");
  settle();
  EXPECT_EQ(bm.check_conservation(), "");
  return out;
}

} // namespace

TEST(block_manager_placement, a_demotion_after_fragmenting_frees_lands_in_one_run) {
  auto contiguous = demote_after_fragmenting(slot_placement_kind::contiguous);
  auto in_eviction_order = demote_after_fragmenting(slot_placement_kind::eviction_order);
  ASSERT_EQ(contiguous.batch.moves.size(), 16u);
  ASSERT_EQ(in_eviction_order.batch.moves.size(), 16u);
  // Which blocks are evicted, in which order, does not depend on placement;
  // contiguous hands a demotion batch out head first: the walk's order reversed.
  std::vector<uint32_t> lru_order{0, 1, 2, 3, 4, 5, 6, 7, 15, 14, 13, 12, 11, 10, 9, 8};
  std::vector<uint32_t> head_first(lru_order.rbegin(), lru_order.rend());
  EXPECT_EQ(in_eviction_order.dram_blocks, lru_order);
  EXPECT_EQ(contiguous.dram_blocks, head_first);
  auto hashes = in_eviction_order.batch.hashes;
  std::reverse(hashes.begin(), hashes.end());
  EXPECT_EQ(contiguous.batch.hashes, hashes);
  for (size_t i = 0; i < 16; ++i)
    EXPECT_EQ(contiguous.batch.moves[i].from_slot, in_eviction_order.batch.moves[15 - i].from_slot);
  const auto& c = contiguous.metrics;
  const auto& e = in_eviction_order.metrics;
  EXPECT_EQ(c.tiers[index_of(tier::dram)].evictions, 16u);
  EXPECT_EQ(e.tiers[index_of(tier::dram)].evictions, 16u);
  EXPECT_EQ(c.tiers[index_of(tier::hbm)].evictions, e.tiers[index_of(tier::hbm)].evictions);
  EXPECT_EQ(c.tiers[index_of(tier::hbm)].evictions_lost, e.tiers[index_of(tier::hbm)].evictions_lost);
  EXPECT_EQ(c.tiers[index_of(tier::dram)].prefix_hit_blocks, 8u);
  EXPECT_EQ(e.tiers[index_of(tier::dram)].prefix_hit_blocks, 8u);

  // Contiguous: slots 0..15 ascending, one DMA. Eviction order: each block
  // where the block it evicted lived, 0..7 then 15 down to 8: nine runs.
  for (uint32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(contiguous.batch.moves[i].to_slot, i);
    EXPECT_EQ(in_eviction_order.batch.moves[i].to_slot, lru_order[i]);
  }
  EXPECT_EQ(c.runs.pcie_d2h.demotion_batches, 2u);
  EXPECT_EQ(c.runs.pcie_d2h.demotion_runs, 2u); // the first demotion was one run too
  EXPECT_EQ(c.runs.pcie_d2h.demotion_blocks, 32u);
  EXPECT_EQ(e.runs.pcie_d2h.demotion_runs, 1u + 9u);
  // The promotion of chain blocks 0..7 reads them head first: slots 0..7 when
  // the demotion was placed head first, slots 15 down to 8 when tail first.
  EXPECT_EQ(c.runs.pcie_h2d.batches, 1u);
  EXPECT_EQ(c.runs.pcie_h2d.runs, 1u);
  EXPECT_EQ(e.runs.pcie_h2d.runs, 8u);
}

TEST_F(block_manager_test, a_sequence_larger_than_hbm_spills_its_cold_blocks_and_streams_them) {
  auto o = options();
  o.stream_recent_blocks = 1;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({1, 2, 3, 4, 5, 6, 7, 8}); // a 32-token prompt: more than HBM's 6 blocks
  ASSERT_EQ(bm.admit(1, chain, 32).status, admit_status::ready);
  ASSERT_EQ(bm.extend(1, 24), admit_status::ready); // HBM full
  EXPECT_EQ(bm.free_blocks(tier::hbm), 0u);
  auto first_hbm_slot = bm.hbm_slots(1)[0];

  // No room: the oldest block goes to DRAM, and the sequence waits for it.
  EXPECT_EQ(bm.extend(1, 4), admit_status::loading);
  EXPECT_FALSE(bm.ready(1));
  EXPECT_EQ(bm.tokens(1), 24u);
  auto batches = bm.take_transfers();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].from, tier::hbm);
  EXPECT_EQ(batches[0].to, tier::dram);
  ASSERT_EQ(batches[0].moves.size(), 1u);
  EXPECT_EQ(batches[0].moves[0].from_slot, first_hbm_slot);
  EXPECT_FALSE(batches[0].background); // the sequence waits on it
  EXPECT_EQ(bm.on_transfer_done(batches[0].tag, true), std::vector<uint64_t>{1});
  EXPECT_EQ(bm.streamed_blocks(1), 1u);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 1u);
  EXPECT_EQ(metrics.spilled_blocks, 1u);
  EXPECT_EQ(bm.check_conservation(), "");

  // The plan names the block's DRAM slot; the step writes in HBM only.
  EXPECT_EQ(bm.extend(1, 4), admit_status::ready);
  auto table = bm.hbm_slots(1);
  ASSERT_EQ(table.size(), 7u);
  EXPECT_EQ(table[0], streamed_slot_bit | batches[0].moves[0].to_slot);
  for (size_t i = 1; i < table.size(); ++i)
    EXPECT_EQ(table[i] & streamed_slot_bit, 0u) << i;
  EXPECT_EQ(bm.tokens(1), 28u);
  // The spilled prompt block serves the prefix cache from DRAM.
  EXPECT_NE(bm.find(tier::dram, chain[0]), invalid_block);
  EXPECT_EQ(bm.check_conservation(), "");

  bm.release(1);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 6u);
  EXPECT_EQ(bm.free_blocks(tier::dram), 4u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, a_sequence_that_fits_hbm_does_not_stream) {
  auto o = options();
  o.stream_recent_blocks = 0;
  block_manager_state bm(o, &metrics);
  ASSERT_EQ(bm.admit(1, chain_of({1, 2, 3, 4}), 16).status, admit_status::ready);
  ASSERT_EQ(bm.extend(1, 16), admit_status::ready);
  ASSERT_EQ(bm.admit(2, chain_of({5, 6}), 8).status, admit_status::ready);
  ASSERT_EQ(bm.extend(2, 8), admit_status::ready);
  // Three blocks would fit HBM alone: short of room, it is preempted, never streamed.
  EXPECT_EQ(bm.extend(2, 4), admit_status::no_room);
  EXPECT_EQ(bm.streamed_blocks(2), 0u);
  EXPECT_TRUE(bm.take_transfers().empty());
  EXPECT_EQ(bm.check_conservation(), "");
}

// A sequence that would fit HBM, alone there, short of room only because
// copies in flight hold slots: preempting it frees nothing it could use (it
// would swap back in and fail again at the same instant), so it streams.
TEST_F(block_manager_test, a_sequence_alone_in_hbm_streams_rather_than_fail) {
  auto o = options();
  o.stream_recent_blocks = 0;
  o.stream_from_dram = true;
  block_manager_state bm(o, &metrics);
  ASSERT_EQ(bm.admit(2, chain_of({7, 8}), 8).status, admit_status::ready);
  ASSERT_EQ(bm.extend(2, 8), admit_status::ready);
  bm.release(2);
  bm.demote_ahead(); // copies both cached blocks down; their HBM slots stay held until they land
  auto demotions = bm.take_transfers();
  ASSERT_EQ(demotions.size(), 1u);
  ASSERT_EQ(demotions[0].moves.size(), 2u);
  ASSERT_EQ(bm.admit(1, chain_of({1, 2, 3, 4}), 16).status, admit_status::ready);
  ASSERT_EQ(bm.extend(1, 16), admit_status::ready);
  EXPECT_EQ(bm.free_blocks(tier::hbm), 0u);
  // Five blocks fit HBM's six; the sixth slot and the fifth are the copies'.
  EXPECT_EQ(bm.extend(1, 4), admit_status::loading);
  auto spill = bm.take_transfers();
  ASSERT_EQ(spill.size(), 1u);
  EXPECT_EQ(spill[0].from, tier::hbm);
  EXPECT_EQ(spill[0].to, tier::dram);
  EXPECT_EQ(bm.check_conservation(), "");
  for (auto& d : demotions)
    bm.on_transfer_done(d.tag, true);
  EXPECT_EQ(bm.on_transfer_done(spill[0].tag, true), std::vector<uint64_t>{1});
  EXPECT_EQ(bm.extend(1, 4), admit_status::ready);
  EXPECT_EQ(bm.tokens(1), 20u);
  EXPECT_EQ(bm.check_conservation(), "");
}

TEST_F(block_manager_test, a_prompt_larger_than_hbm_leaves_its_leading_dram_hits_in_dram) {
  auto o = options();
  o.dram_blocks = 8;
  o.stream_recent_blocks = 1;
  block_manager_state bm(o, &metrics);
  auto chain = chain_of({1, 2, 3, 4, 5, 6, 7, 8}); // 8 blocks through 6 of HBM
  ASSERT_EQ(bm.admit(1, chain, 32).status, admit_status::ready);
  ASSERT_EQ(bm.extend(1, 24), admit_status::ready);
  for (int spill = 0; spill < 2; ++spill) {
    ASSERT_EQ(bm.extend(1, 4), admit_status::loading);
    settle(bm);
    ASSERT_EQ(bm.extend(1, 4), admit_status::ready);
  }
  EXPECT_EQ(bm.streamed_blocks(1), 2u);
  bm.release(1);
  // Blocks 0 and 1 are cached in DRAM only (their HBM slots went to blocks 6
  // and 7), 2..7 in HBM: all eight cannot be in HBM, so the DRAM two stream.
  EXPECT_EQ(bm.find(tier::hbm, chain[0]), invalid_block);
  auto a = bm.admit(2, chain, 32);
  EXPECT_EQ(a.status, admit_status::ready);
  EXPECT_EQ(a.hit_blocks, 8u);
  EXPECT_EQ(a.hits_by_tier[index_of(tier::dram)], 2u);
  EXPECT_EQ(bm.streamed_blocks(2), 2u);
  EXPECT_EQ(bm.tokens(2), 32u);
  EXPECT_TRUE(bm.take_transfers().empty()); // nothing promoted
  auto table = bm.hbm_slots(2);
  ASSERT_EQ(table.size(), 8u);
  EXPECT_EQ(table[0], streamed_slot_bit | bm.slot_of(tier::dram, bm.find(tier::dram, chain[0])));
  EXPECT_EQ(table[1], streamed_slot_bit | bm.slot_of(tier::dram, bm.find(tier::dram, chain[1])));
  EXPECT_EQ(bm.check_conservation(), "");
  bm.release(2);
  EXPECT_EQ(bm.check_conservation(), "");
}
