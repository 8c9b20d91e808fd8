#include "runtime/block_table.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

TEST(block_table, appends_whole_blocks) {
  block_pool pool(8);
  block_table t(4);
  auto r = t.append(10, pool);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->new_blocks.size(), 3u);
  EXPECT_EQ(t.tokens(), 10u);
  EXPECT_EQ(t.tail_tokens(), 2u);
  r = t.append(2, pool); // fills the tail, no new block
  EXPECT_TRUE(r->new_blocks.empty());
  EXPECT_EQ(t.blocks().size(), 3u);
  r = t.append(1, pool);
  EXPECT_EQ(r->new_blocks.size(), 1u);
  EXPECT_EQ(pool.free_count(), 4u);
}

TEST(block_table, no_room_changes_nothing) {
  block_pool pool(2);
  block_table t(4);
  ASSERT_TRUE(t.append(5, pool));
  auto r = t.append(8, pool); // needs 2 more blocks, 0 free
  ASSERT_FALSE(r);
  EXPECT_TRUE(is(r.error(), errc::no_capacity));
  EXPECT_EQ(t.tokens(), 5u);
  EXPECT_EQ(t.blocks().size(), 2u);
}

TEST(block_table, fork_shares_and_copy_on_write_of_partial_tail) {
  block_pool pool(8);
  block_table parent(4);
  ASSERT_TRUE(parent.append(6, pool)); // blocks 0 (full), 1 (2 of 4 tokens)
  auto child = parent.fork(pool);
  EXPECT_EQ(pool.ref_count(block_id{0}), 2u);
  EXPECT_EQ(pool.ref_count(block_id{1}), 2u);
  auto r = child.append(1, pool);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->copies.size(), 1u);
  EXPECT_EQ(r->copies[0].from, block_id{1});
  EXPECT_EQ(r->copies[0].to, block_id{2});
  EXPECT_EQ(r->copies[0].tokens, 2u);
  EXPECT_EQ(child.blocks(), (std::vector<block_id>{block_id{0}, block_id{2}}));
  EXPECT_EQ(parent.blocks(), (std::vector<block_id>{block_id{0}, block_id{1}}));
  EXPECT_EQ(pool.ref_count(block_id{1}), 1u);
  // The parent writes its own tail in place now that it is no longer shared.
  r = parent.append(1, pool);
  EXPECT_TRUE(r->copies.empty());
  parent.release_all(pool);
  child.release_all(pool);
  EXPECT_EQ(pool.free_count(), 8u);
}

TEST(block_table, full_shared_tail_needs_no_copy) {
  block_pool pool(8);
  block_table parent(4);
  ASSERT_TRUE(parent.append(8, pool));
  auto child = parent.fork(pool);
  auto r = child.append(3, pool);
  EXPECT_TRUE(r->copies.empty());
  EXPECT_EQ(r->new_blocks.size(), 1u);
}
