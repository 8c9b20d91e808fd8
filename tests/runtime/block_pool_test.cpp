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
