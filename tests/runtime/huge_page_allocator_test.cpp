#include "runtime/huge_page_allocator.hpp"
#include "runtime/zeroed_array.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
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

TEST(zeroed_array, tables_come_zero_filled_without_being_written) {
  struct bucket {
    uint64_t key;
    uint32_t a, b;
  };
  zeroed_array<bucket> large(3u << 20); // 48 MiB: a mapping
  zeroed_array<bucket> small(100);      // calloc
  EXPECT_EQ(reinterpret_cast<uintptr_t>(&large[0]) % (2u << 20), 0u);
  for (size_t i = 0; i < large.size(); i += 4099)
    ASSERT_TRUE(large[i].key == 0 && large[i].a == 0 && large[i].b == 0) << i;
  for (size_t i = 0; i < small.size(); ++i)
    ASSERT_TRUE(small[i].key == 0 && small[i].a == 0 && small[i].b == 0);
  // Memory given back and taken again is zero again; a moved-from array holds nothing.
  large[7].key = 7;
  large = zeroed_array<bucket>(3u << 20);
  EXPECT_EQ(large[7].key, 0u);
  zeroed_array<bucket> moved = std::move(large);
  EXPECT_EQ(large.size(), 0u);
  EXPECT_EQ(moved.size(), size_t{3u << 20});
  EXPECT_EQ(moved[(3u << 20) - 1].key, 0u);
}
