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
