#include "runtime/huge_page_allocator.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace kvtier;

TEST(huge_page_allocator, large_tables_are_huge_page_aligned_and_hold_their_bytes) {
  std::vector<uint64_t, huge_page_allocator<uint64_t>> table(3u << 20, 0); // 24 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(table.data()) % (2u << 20), 0u);
  for (size_t i = 0; i < table.size(); i += 4099)
    table[i] = i * 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < table.size(); i += 4099)
    ASSERT_EQ(table[i], i * 0x9e3779b97f4a7c15ull) << i;
}

TEST(huge_page_allocator, small_tables_are_ordinary_allocations) {
  std::vector<uint32_t, huge_page_allocator<uint32_t>> small(1000, 7);
  EXPECT_EQ(small[999], 7u);
  small.resize(100000, 9); // grows through the same allocator
  EXPECT_EQ(small[999], 7u);
  EXPECT_EQ(small[99999], 9u);
}

TEST(huge_page_allocator, tables_come_zero_filled_without_being_written) {
  struct bucket {
    uint64_t key;
    uint32_t a, b;
  };
  std::vector<bucket, huge_page_allocator<bucket>> large(3u << 20); // 48 MiB: a mapping
  std::vector<bucket, huge_page_allocator<bucket>> small(100);      // calloc
  for (size_t i = 0; i < large.size(); i += 4099)
    ASSERT_TRUE(large[i].key == 0 && large[i].a == 0 && large[i].b == 0) << i;
  for (const auto& b : small)
    ASSERT_TRUE(b.key == 0 && b.a == 0 && b.b == 0);
  // Reused memory is zero again: a second table where the first was.
  large = {};
  std::vector<bucket, huge_page_allocator<bucket>> again(3u << 20);
  large.swap(again);
  EXPECT_EQ(large.back().key, 0u);
  large.back().key = 7;
  large.resize(large.size() + 10); // grows: the old elements move, the new ones are zero
  EXPECT_EQ(large[(3u << 20) - 1].key, 7u);
  EXPECT_EQ(large.back().key, 0u);
}
