// A restart reuses what the NVMe tier kept: the slot file after a clean
// close, a damaged superblock, a truncated file, damaged headers, a file that
// is not kvtier's, and an explicit reformat. Both slot layouts (recovery reads
// headers with pread whatever the engine, so the thread pool suffices).

#include "io/slot_file.hpp"
#include "io/slot_store.hpp"
#include "io_test_util.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>

using namespace kvtier;
using namespace kvtier::io;
using namespace kvtier::io::test;

namespace {

constexpr uint32_t layers = 2;
constexpr uint64_t layer_bytes = 8 << 10; // 16 KiB blocks
constexpr uint32_t nvme_slots = 24;

/// Salt of block i: three tenants, so salts are checked, not assumed zero.
uint64_t salt_of(uint32_t i) {
  return i % 3;
}

class recovery_test : public ::testing::TestWithParam<test_mode> {
protected:
  nvme_options options(open_policy policy = open_policy::reuse) const {
    nvme_options o;
    o.file = dir.file();
    apply(GetParam(), o);
    o.queue_depth = 4;
    o.on_open = policy;
    return o;
  }
  caf::expected<std::unique_ptr<slot_store>> try_open(open_policy policy = open_policy::reuse) {
    return slot_store::open(options(policy), nvme_slots, pool.region());
  }
  std::unique_ptr<slot_store> open(open_policy policy = open_policy::reuse) {
    auto s = try_open(policy);
    EXPECT_TRUE(s) << describe(s.error());
    return s ? std::move(*s) : nullptr;
  }
  /// Writes block i into NVMe slot i for every i in [0, n), in one job; closes the store.
  void write_and_close(uint32_t n) {
    auto s = open();
    ASSERT_TRUE(s);
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < n; ++i) {
      fill_block(pool.slot(i), pool.block_bytes(), i);
      pages.push_back({i, i, hash_of(i), salt_of(i)});
    }
    auto w = run(*s, make_job(page_op::write, 1, pages));
    ASSERT_FALSE(w.error) << describe(w.error);
    geometry = s->geometry();
  }
  /// Reads NVMe slot i into DRAM slot 0; true when it came back with block i's bytes.
  bool reads_back(slot_store& s, uint32_t i) {
    std::memset(pool.slot(0), 0, pool.block_bytes());
    auto r = run(s, make_job(page_op::read, 2, {{0, i, hash_of(i), salt_of(i)}}));
    if (r.error)
      return false;
    std::vector<std::byte> expected(pool.block_bytes());
    fill_block(expected.data(), expected.size(), i);
    return pool.checksum(0) == XXH3_64bits(expected.data(), expected.size());
  }
  void scribble(uint64_t offset, std::vector<unsigned char> bytes) {
    int fd = ::open(dir.file().c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)), static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  }

  temp_dir dir;
  dram_pool pool{nvme_slots, layers, layer_bytes};
  slot_geometry geometry;
};

std::vector<recovered_block> expected_blocks(uint32_t first, uint32_t end) {
  std::vector<recovered_block> out;
  for (uint32_t i = first; i < end; ++i)
    out.push_back({i, hash_of(i), salt_of(i)});
  return out;
}

} // namespace

TEST_P(recovery_test, reopen_recovers_every_block_with_its_hash_salt_and_bytes) {
  write_and_close(20);
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().formatted);
  EXPECT_EQ(s->report().recovered, 20u);
  EXPECT_EQ(s->report().damaged + s->report().truncated, 0u);
  EXPECT_EQ(s->report().superblock_rebuilt, "");
  EXPECT_EQ(s->recovered_blocks(), expected_blocks(0, 20));
  for (uint32_t i = 0; i < 20; ++i)
    EXPECT_TRUE(reads_back(*s, i)) << "block " << i;
  EXPECT_NE(s->report().message().find("; recovered 20 blocks"), std::string::npos) << s->report().message();
}

TEST_P(recovery_test, a_block_stored_twice_is_adopted_once_newest_copy) {
  write_and_close(4);
  {
    auto s = open();
    ASSERT_TRUE(s);
    fill_block(pool.slot(0), pool.block_bytes(), 1); // block 1 again, into slot 9
    ASSERT_FALSE(run(*s, make_job(page_op::write, 3, {{0, 9, hash_of(1), salt_of(1)}})).error);
  }
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->report().recovered, 5u);
  std::vector<recovered_block> want{{0, hash_of(0), salt_of(0)},
                                    {2, hash_of(2), salt_of(2)},
                                    {3, hash_of(3), salt_of(3)},
                                    {9, hash_of(1), salt_of(1)}};
  EXPECT_EQ(s->recovered_blocks(), want);
}

TEST_P(recovery_test, damaged_superblock_is_rebuilt_from_the_slot_headers) {
  write_and_close(12);
  scribble(48, {0xde, 0xad}); // inside the superblock's checksum
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().formatted) << s->report().format_why;
  EXPECT_EQ(s->report().recovered, 12u);
  EXPECT_EQ(s->report().superblock_rebuilt,
            "the superblock was damaged (checksum mismatch); rebuilt from 12 valid slot headers");
  EXPECT_EQ(s->recovered_blocks(), expected_blocks(0, 12));
  for (uint32_t i = 0; i < 12; ++i)
    EXPECT_TRUE(reads_back(*s, i)) << "block " << i;
  s.reset();
  auto again = open(); // the rebuilt superblock is valid
  ASSERT_TRUE(again);
  EXPECT_EQ(again->report().superblock_rebuilt, "");
  EXPECT_EQ(again->report().recovered, 12u);
}

TEST_P(recovery_test, zeroed_superblock_over_kvtier_headers_is_rebuilt) {
  write_and_close(3);
  scribble(0, std::vector<unsigned char>(4096, 0));
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().formatted);
  EXPECT_EQ(s->report().superblock_rebuilt, "the superblock was missing (all zero); rebuilt from 3 valid slot headers");
  EXPECT_EQ(s->recovered_blocks(), expected_blocks(0, 3));
}

TEST_P(recovery_test, damaged_superblock_without_a_valid_header_is_an_error_naming_the_file) {
  write_and_close(0);
  scribble(48, {0xde, 0xad});
  auto s = try_open();
  ASSERT_FALSE(s);
  EXPECT_TRUE(is(s.error(), errc::corrupted));
  EXPECT_EQ(describe(s.error()),
            "NVMe tier: the superblock of " + dir.file() +
                " is damaged (checksum mismatch) and no slot header is valid at the configured 24 slots of 16384 "
                "bytes (" +
                (is_split(GetParam()) ? "split" : "adjacent") +
                " layout); set [tiers.nvme] on_open = \"reformat\" to discard its blocks");
  auto told = open(open_policy::reformat);
  ASSERT_TRUE(told);
  EXPECT_TRUE(told->report().formatted);
  EXPECT_EQ(told->report().format_why, "on_open = \"reformat\"");
}

TEST_P(recovery_test, truncated_file_keeps_the_slots_that_are_intact) {
  write_and_close(24);
  // Cut the file in the middle of slot 15's payload.
  const uint64_t cut = geometry.payload_offset(15) + 4096;
  ASSERT_EQ(::truncate(dir.file().c_str(), static_cast<off_t>(cut)), 0);
  // Adjacent: slots 0..14 end before the cut. Split: every header is before
  // the payload region, and payloads 0..14 end before the cut.
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().formatted) << s->report().format_why;
  EXPECT_EQ(s->report().recovered, 15u);
  EXPECT_EQ(s->report().truncated, 9u);
  EXPECT_EQ(s->report().damaged, 0u);
  EXPECT_EQ(s->recovered_blocks(), expected_blocks(0, 15));
  EXPECT_EQ(std::filesystem::file_size(dir.file()), geometry.file_bytes());
  for (uint32_t i = 0; i < 15; ++i)
    EXPECT_TRUE(reads_back(*s, i)) << "block " << i;
  EXPECT_FALSE(reads_back(*s, 15));
  EXPECT_NE(s->report().message().find("the file ended 9 slots early"), std::string::npos) << s->report().message();
  s.reset();
  auto again = open(); // extended, and slot 15's header (cut off payload) cleared
  ASSERT_TRUE(again);
  EXPECT_EQ(again->report().recovered, 15u);
  EXPECT_EQ(again->report().truncated + again->report().damaged, 0u);
}

TEST_P(recovery_test, corrupted_headers_are_counted_damaged_with_why) {
  write_and_close(10);
  scribble(geometry.header_offset(4) + 30, {0x55});     // inside the block hash: checksum fails
  scribble(geometry.header_offset(7), {'x', 'y', 'z'}); // the magic itself
  scribble(geometry.header_offset(20) + 40, {0x01});    // an empty slot with stray bytes
  auto s = open();
  ASSERT_TRUE(s);
  const auto& r = s->report();
  EXPECT_EQ(r.recovered, 8u);
  EXPECT_EQ(r.damaged, 3u);
  ASSERT_EQ(r.damage.size(), 3u);
  EXPECT_EQ(r.damage[0].nvme_slot, 4u);
  EXPECT_EQ(r.damage[0].why, "header checksum mismatch (torn or corrupted write)");
  EXPECT_EQ(r.damage[1].nvme_slot, 7u);
  EXPECT_EQ(r.damage[1].why, "not a slot header (no magic)");
  EXPECT_EQ(r.damage[2].nvme_slot, 20u);
  EXPECT_EQ(r.damage[2].why, "not a slot header (no magic)");
  EXPECT_NE(r.message().find("3 slots damaged (treated as empty): slot 4 (header checksum mismatch (torn or "
                             "corrupted write)), slot 7 (not a slot header (no magic)), slot 20"),
            std::string::npos)
      << r.message();
  EXPECT_FALSE(reads_back(*s, 4));
  EXPECT_TRUE(reads_back(*s, 5));
}

TEST_P(recovery_test, another_geometry_is_refused_unless_reformat_is_asked) {
  write_and_close(2);
  dram_pool bigger(2, layers * 2, layer_bytes);
  auto o = options();
  auto refused = slot_store::open(o, nvme_slots, bigger.region());
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::invalid_config));
  const std::string layout = is_split(GetParam()) ? "split" : "adjacent";
  EXPECT_EQ(describe(refused.error()),
            "NVMe tier: " + dir.file() + " holds 24 slots of 16384 bytes (" + layout +
                " layout), the configuration wants 24 slots of 32768 bytes (" + layout +
                " layout); set [tiers.nvme] on_open = \"reformat\" to discard its blocks, or run with the "
                "configuration that wrote it");
  o.on_open = open_policy::reformat;
  auto s = slot_store::open(o, nvme_slots, bigger.region());
  ASSERT_TRUE(s) << describe(s.error());
  EXPECT_TRUE((*s)->report().formatted);
  EXPECT_EQ((*s)->report().recovered, 0u);
  EXPECT_TRUE((*s)->recovered_blocks().empty());
}

TEST_P(recovery_test, a_file_that_is_not_kvtiers_is_formatted_and_says_so) {
  {
    std::FILE* f = std::fopen(dir.file().c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("notes of another program\n", f);
    std::fclose(f);
  }
  auto s = open();
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->report().formatted);
  EXPECT_EQ(s->report().format_why,
            dir.file() + " is not a kvtier slot file (no kvtier magic in its superblock or slot headers)");
  EXPECT_NE(s->report().message().find("formatted a new slot file (" + dir.file() + " is not a kvtier"),
            std::string::npos);
}

TEST_P(recovery_test, reformat_discards_what_was_stored) {
  write_and_close(6);
  auto s = open(open_policy::reformat);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->report().formatted);
  EXPECT_EQ(s->report().recovered, 0u);
  EXPECT_TRUE(s->manifest().empty());
  EXPECT_FALSE(reads_back(*s, 0));
}

INSTANTIATE_TEST_SUITE_P(layouts, recovery_test, ::testing::Values(test_mode::threads, test_mode::threads_split),
                         mode_name);
