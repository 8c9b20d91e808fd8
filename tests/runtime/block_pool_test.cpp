#include "runtime/block_pool.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace kvtier;

namespace {
std::vector<uint32_t> ids(const std::vector<block_id>& v) {
  std::vector<uint32_t> out;
  for (auto id : v)
    out.push_back(index_of(id));
  return out;
}
block_hash h(uint64_t x) {
  return {x, x * 31 + 7};
}
} // namespace

TEST(block_pool, metadata_is_32_bytes) {
  EXPECT_EQ(block_pool::metadata_bytes_per_block(), 32u);
}

TEST(block_pool, allocates_in_slot_order_then_reports_no_room) {
  block_pool pool(3);
  EXPECT_EQ(index_of(pool.allocate()->id), 0u);
  EXPECT_EQ(index_of(pool.allocate()->id), 1u);
  EXPECT_EQ(index_of(pool.allocate()->id), 2u);
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.free_count(), 0u);
}

TEST(block_pool, lru_order_and_tail_first_release) {
  block_pool pool(6);
  std::vector<block_id> seq_a, seq_b;
  for (int i = 0; i < 3; ++i)
    seq_a.push_back(pool.allocate()->id); // 0 1 2
  for (int i = 0; i < 3; ++i)
    seq_b.push_back(pool.allocate()->id); // 3 4 5
  for (int i = 0; i < 3; ++i) {
    pool.set_hash(seq_a[i], h(i + 1));
    pool.set_hash(seq_b[i], h(i + 11));
  }
  pool.release_sequence(seq_b); // queue: 5 4 3
  pool.release_sequence(seq_a); // queue: 5 4 3 2 1 0
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{5, 4, 3, 2, 1, 0}));
  auto a = pool.allocate();
  EXPECT_EQ(index_of(a->id), 5u);
  EXPECT_EQ(a->evicted, h(13)); // lazy eviction reports the hash it dropped
  EXPECT_TRUE(pool.hash(a->id).empty());
}

TEST(block_pool, ref_revives_a_cached_block) {
  block_pool pool(3);
  auto a = pool.allocate()->id;
  pool.set_hash(a, h(1));
  pool.set_state(a, block_state::full);
  EXPECT_TRUE(pool.release(a));
  EXPECT_EQ(pool.free_count(), 3u);
  EXPECT_EQ(pool.state(a), block_state::free);
  pool.ref(a); // prefix hit
  EXPECT_EQ(pool.free_count(), 2u);
  EXPECT_EQ(pool.ref_count(a), 1u);
  EXPECT_EQ(pool.state(a), block_state::full);
  EXPECT_EQ(pool.hash(a), h(1));
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{1, 2}));
}

TEST(block_pool, shared_block_frees_on_last_release) {
  block_pool pool(2);
  auto a = pool.allocate()->id;
  pool.ref(a);
  EXPECT_EQ(pool.ref_count(a), 2u);
  EXPECT_FALSE(pool.release(a));
  EXPECT_TRUE(pool.release(a));
}

TEST(block_pool, forget_moves_to_head) {
  block_pool pool(3);
  auto a = pool.allocate()->id, b = pool.allocate()->id, c = pool.allocate()->id;
  pool.set_hash(b, h(2));
  pool.release(a);
  pool.release(b);
  pool.release(c); // queue: a b c
  pool.forget(c);  // c holds nothing worth keeping: reuse it first
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{2, 0, 1}));
  EXPECT_TRUE(pool.hash(c).empty());
}

TEST(block_pool, double_free_is_a_caller_bug) {
  block_pool pool(1);
  auto a = pool.allocate()->id;
  pool.release(a);
  EXPECT_DEATH(pool.release(a), "double free");
}

TEST(block_pool, empty_then_clean_then_dirty) {
  block_pool pool(4);
  auto a = pool.allocate()->id, b = pool.allocate()->id, c = pool.allocate()->id;
  pool.set_hash(a, h(1));
  pool.set_hash(b, h(2));
  pool.release(a);        // sole copy: dirty
  pool.release_backed(b); // a lower tier holds it: clean
  pool.release(c);        // unhashed: clean head
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{2, 3, 1, 0}));
  EXPECT_EQ(pool.first_dirty(), a);
  pool.mark_clean(a);
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{2, 3, 1, 0}));
  EXPECT_EQ(pool.first_dirty(), invalid_block);
  pool.mark_dirty(b); // its copy below was evicted
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{2, 3, 0, 1}));
  EXPECT_EQ(pool.allocate()->evicted, block_hash{}); // empty slots first
  EXPECT_EQ(pool.allocate()->evicted, block_hash{});
  EXPECT_EQ(pool.allocate()->evicted, h(1)); // then the backed copy
  EXPECT_EQ(pool.allocate()->evicted, h(2)); // the sole copy last
}

// Never-used slots are not linked until first touched (invariant 6): every
// order must be what a pool that linked all of them at construction gives.
TEST(block_pool, never_used_slots_keep_their_place_when_first_touched_in_the_middle) {
  block_pool pool(6);
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(index_of(pool.peek_lru()), 0u);
  EXPECT_EQ(index_of(pool.next_free(block_id{2})), 3u);
  EXPECT_EQ(pool.next_free(block_id{5}), invalid_block);
  pool.evict_next(block_id{3}); // touches slot 3 first: 0..3 are linked, 4 and 5 stay implicit
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{3, 0, 1, 2, 4, 5}));
  EXPECT_EQ(ids(pool.free_queue_order(4)), (std::vector<uint32_t>{3, 0, 1, 2}));
  EXPECT_EQ(index_of(pool.next_free(block_id{2})), 4u); // a linked slot followed by the run
  EXPECT_EQ(index_of(pool.next_free(block_id{4})), 5u);
  EXPECT_EQ(pool.next_free(block_id{5}), invalid_block);
  EXPECT_EQ(pool.free_count(), 6u);
  EXPECT_EQ(pool.clean_count(), 6u);
  EXPECT_EQ(pool.hash(block_id{5}), block_hash{});
  EXPECT_EQ(pool.ref_count(block_id{5}), 0u);
  EXPECT_EQ(pool.state(block_id{5}), block_state::free);
  EXPECT_FALSE(pool.on_dirty_list(block_id{5}));

  std::vector<uint32_t> order;
  for (int i = 0; i < 6; ++i)
    order.push_back(index_of(pool.allocate()->id));
  EXPECT_EQ(order, (std::vector<uint32_t>{3, 0, 1, 2, 4, 5}));
  EXPECT_FALSE(pool.allocate().has_value());
  EXPECT_EQ(pool.peek_lru(), invalid_block);
}

TEST(block_pool, frees_land_on_either_side_of_the_never_used_slots) {
  block_pool pool(8);
  auto a = pool.allocate()->id; // 0
  auto b = pool.allocate()->id; // 1
  pool.set_hash(a, h(1));
  pool.release(b);                  // unhashed: the clean list's head
  pool.release_backed(a);           // hashed and backed: the clean list's tail
  pool.set_hash(block_id{6}, h(2)); // a never-used slot touched out of order
  pool.evict_next(block_id{6});     // ... and sent to the head
  pool.mark_dirty(block_id{6});     // hashed, clean, now the only copy
  EXPECT_EQ(ids(pool.free_queue_order()), (std::vector<uint32_t>{1, 2, 3, 4, 5, 7, 0, 6}));
  EXPECT_EQ(index_of(pool.next_free(block_id{7})), 0u);
  EXPECT_EQ(index_of(pool.first_dirty()), 6u);
  EXPECT_EQ(pool.free_count(), 8u);
  EXPECT_EQ(pool.clean_count(), 7u);
  std::vector<uint32_t> order;
  std::vector<bool> sole;
  for (int i = 0; i < 8; ++i) {
    auto got = pool.allocate();
    order.push_back(index_of(got->id));
    sole.push_back(got->sole_copy);
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 2, 3, 4, 5, 7, 0, 6}));
  EXPECT_EQ(sole, (std::vector<bool>{false, false, false, false, false, false, false, true}));
}
