#include "runtime/error.hpp"
#include "runtime/units.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

TEST(units, bytes) {
  EXPECT_EQ(*parse_bytes("141GB"), 141'000'000'000u);
  EXPECT_EQ(*parse_bytes("64GiB"), 64ull << 30);
  EXPECT_EQ(*parse_bytes("1.5KiB"), 1536u);
  EXPECT_EQ(*parse_bytes("4096"), 4096u);
  EXPECT_EQ(*parse_bytes("2 MiB"), 2u << 20);
  auto bad = parse_bytes("12 parsecs");
  ASSERT_FALSE(bad);
  EXPECT_EQ(describe(bad.error()),
            "'12 parsecs' has unknown size unit 'parsecs': expected B, KB, MB, GB, TB, KiB, MiB, GiB or TiB");
  EXPECT_FALSE(parse_bytes("GB"));
}

TEST(units, tokens_follow_model_cards) {
  EXPECT_EQ(*parse_tokens("128k"), 131'072u);
  EXPECT_EQ(*parse_tokens("1M"), 1'048'576u);
  EXPECT_EQ(*parse_tokens("100000"), 100'000u);
  EXPECT_EQ(*parse_tokens("100_000"), 100'000u);
  EXPECT_FALSE(parse_tokens("12q"));
}

TEST(units, formatting) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3ull << 30), "3.00 GiB");
  EXPECT_EQ(format_count(327'680), "327,680");
  EXPECT_EQ(format_count(1'000), "1,000");
  EXPECT_EQ(format_count(12), "12");
}

TEST(errors, is_on_an_empty_error_is_false) {
  EXPECT_FALSE(is(caf::error{}, errc::corrupted));
  EXPECT_TRUE(is(make_error(errc::corrupted, "x"), errc::corrupted));
  EXPECT_FALSE(is(make_error(errc::io_failure, "x"), errc::corrupted));
}

TEST(units, overflow_and_non_numbers_are_errors) {
  auto big = parse_tokens("99999999999999999999k");
  ASSERT_FALSE(big);
  EXPECT_EQ(describe(big.error()), "'99999999999999999999k' is too large for a token count: expected at most 2^64 - 1");
  auto huge = parse_bytes("17000000000TB");
  ASSERT_FALSE(huge);
  EXPECT_EQ(describe(huge.error()), "'17000000000TB' is too large for a size: expected at most 16 EiB");
  EXPECT_EQ(*parse_bytes("16000000TB"), 16'000'000'000'000'000'000u);
  EXPECT_FALSE(parse_bytes("nan"));
  EXPECT_FALSE(parse_bytes("inf"));
  EXPECT_FALSE(parse_bytes("-1GB"));
  EXPECT_FALSE(parse_tokens("1e5"));
}
