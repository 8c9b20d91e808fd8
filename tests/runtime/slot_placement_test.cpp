#include "runtime/free_extents.hpp"
#include "runtime/slot_placement.hpp"

#include <gtest/gtest.h>

#include <vector>

using namespace kvtier;

namespace {
std::vector<slot_run> runs(std::initializer_list<std::pair<uint32_t, uint32_t>> r) {
  std::vector<slot_run> out;
  for (auto [first, count] : r)
    out.push_back({first, count});
  return out;
}
std::vector<uint32_t> slots_of(const slot_placement& p, uint32_t first, uint32_t count) {
  std::vector<uint32_t> out;
  for (uint32_t b = first; b < first + count; ++b)
    out.push_back(p.slot_of(block_id{b}));
  return out;
}
} // namespace

TEST(free_extents, takes_downwards_from_the_top_in_ascending_runs) {
  free_extents f(10);
  EXPECT_EQ(f.take(4), runs({{6, 4}}));
  EXPECT_EQ(f.cursor(), 6u);
  EXPECT_EQ(f.take(3), runs({{3, 3}}));
  EXPECT_EQ(f.free_count(), 3u);
  EXPECT_EQ(f.extents(), runs({{0, 3}}));
}

TEST(free_extents, give_back_coalesces_with_both_neighbours) {
  free_extents f(10);
  f.take(10);
  f.give_back(3);
  f.give_back(5);
  EXPECT_EQ(f.extents(), runs({{3, 1}, {5, 1}}));
  f.give_back(4); // bridges the two
  EXPECT_EQ(f.extents(), runs({{3, 3}}));
  f.give_back(2); // joins at the front
  f.give_back(6); // and at the back
  EXPECT_EQ(f.extents(), runs({{2, 5}}));
  f.give_back(9);
  EXPECT_EQ(f.extents(), runs({{2, 5}, {9, 1}}));
  EXPECT_EQ(f.free_count(), 6u);
  EXPECT_TRUE(f.is_free(6));
  EXPECT_FALSE(f.is_free(7));
  EXPECT_FALSE(f.is_free(1));
}

TEST(free_extents, a_batch_takes_what_lies_below_the_cursor_across_holes_then_wraps) {
  free_extents f(16);
  f.take(16);
  EXPECT_EQ(f.cursor(), 0u);
  for (uint32_t s : {1u, 2u, 3u, 6u, 7u, 10u, 11u, 12u, 13u, 14u})
    f.give_back(s); // [1, 4) [6, 8) [10, 15)
  // Nothing below slot 0: from the top, [10, 15) whole, then [6, 8) and the top of [1, 4).
  EXPECT_EQ(f.take(8), runs({{3, 1}, {6, 2}, {10, 5}}));
  EXPECT_EQ(f.cursor(), 3u);
  EXPECT_EQ(f.extents(), runs({{1, 2}}));
  f.give_back(13);
  f.give_back(12);
  // [1, 3) lies below the cursor: taken before the higher [12, 14), which the wrap reaches.
  EXPECT_EQ(f.take(3), runs({{1, 2}, {13, 1}}));
  EXPECT_EQ(f.cursor(), 13u);
  EXPECT_EQ(f.extents(), runs({{12, 1}}));
}

TEST(free_extents, slots_freed_from_the_top_of_a_batch_down_are_the_next_batch_one_run) {
  // Batches of 4 taken head first from the top; each is evicted first-in
  // first-out, its highest slot first. A batch never finds its slots split.
  free_extents f(12);
  EXPECT_EQ(f.take(4), runs({{8, 4}}));
  EXPECT_EQ(f.take(4), runs({{4, 4}}));
  EXPECT_EQ(f.take(4), runs({{0, 4}}));
  for (uint32_t s : {11u, 10u, 9u}) // three of the first batch
    f.give_back(s);
  EXPECT_EQ(f.take(3), runs({{9, 3}}));
  for (uint32_t s : {8u, 7u, 6u}) // the first batch's last, the second's first two
    f.give_back(s);
  EXPECT_EQ(f.take(3), runs({{6, 3}}));
  EXPECT_EQ(f.free_count(), 0u);
}

TEST(free_extents, take_slot_splits_an_extent) {
  free_extents f(8);
  EXPECT_TRUE(f.take_slot(3));
  EXPECT_FALSE(f.take_slot(3));
  EXPECT_TRUE(f.take_slot(0));
  EXPECT_TRUE(f.take_slot(7));
  EXPECT_EQ(f.extents(), runs({{1, 2}, {4, 3}}));
  EXPECT_EQ(f.free_count(), 5u);
}

TEST(slot_placement, eviction_order_keeps_each_block_in_its_own_slot) {
  slot_placement p(4, slot_placement_kind::eviction_order);
  std::vector<block_id> batch{block_id{3}, block_id{1}};
  p.place(batch);
  EXPECT_EQ(p.slot_of(block_id{3}), 3u);
  EXPECT_EQ(p.slot_of(block_id{1}), 1u);
  EXPECT_EQ(index_of(p.block_in(2)), 2u);
  EXPECT_TRUE(p.place_at(block_id{2}, 2));
  EXPECT_FALSE(p.place_at(block_id{2}, 1));
}

TEST(slot_placement, a_batch_of_scattered_blocks_lands_in_one_ascending_run) {
  slot_placement p(8, slot_placement_kind::contiguous);
  std::vector<block_id> batch{block_id{6}, block_id{2}, block_id{4}};
  p.place(batch);
  EXPECT_EQ(p.slot_of(block_id{6}), 5u);
  EXPECT_EQ(p.slot_of(block_id{2}), 6u);
  EXPECT_EQ(p.slot_of(block_id{4}), 7u);
  EXPECT_EQ(index_of(p.block_in(6)), 2u);
  EXPECT_EQ(p.block_in(3), invalid_block);
  EXPECT_FALSE(p.placed(block_id{0}));
  // Placed blocks keep their slots; only the unplaced ones of a batch move in.
  std::vector<block_id> next{block_id{2}, block_id{0}};
  p.place(next);
  EXPECT_EQ(p.slot_of(block_id{2}), 6u);
  EXPECT_EQ(p.slot_of(block_id{0}), 4u);
}

TEST(slot_placement, released_slots_coalesce_and_the_next_batch_fits_the_gap) {
  slot_placement p(8, slot_placement_kind::contiguous);
  std::vector<block_id> all;
  for (uint32_t b = 0; b < 8; ++b)
    all.push_back(block_id{b});
  p.place(all);
  // Blocks in slots 5, 2, 3, 4 go, in that order: slots [2, 6) are one run again.
  for (uint32_t b : {5u, 2u, 3u, 4u})
    p.release(block_id{b});
  EXPECT_EQ(p.free_slots().extents(), runs({{2, 4}}));
  std::vector<block_id> batch{block_id{4}, block_id{5}, block_id{2}, block_id{3}};
  p.place(batch);
  EXPECT_EQ(slots_of(p, 2, 4), (std::vector<uint32_t>{4, 5, 2, 3}));
  EXPECT_EQ(p.free_slots().free_count(), 0u);
  // Adoption: a given slot, only while it is free and the block has none.
  p.release(block_id{7});
  EXPECT_FALSE(p.place_at(block_id{6}, 7)); // block 6 has a slot
  EXPECT_TRUE(p.place_at(block_id{7}, 7));
  EXPECT_FALSE(p.place_at(block_id{7}, 7));
}
