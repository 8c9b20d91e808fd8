// Every fault of faulty_page_file, on both engines: zero blocks lost (each
// block reads back exactly, or its failure was reported and its DRAM copy is
// intact) and zero wrong bytes (no read reports ok over bytes that differ).

#include "io/faulty_page_file.hpp"
#include "io/slot_store.hpp"
#include "io_test_util.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::io;
using namespace kvtier::io::test;

namespace {

constexpr uint32_t blocks = 8;
constexpr uint64_t block_bytes = 32 << 10;
constexpr uint64_t forever = ~uint64_t{0};

class fault_test : public ::testing::TestWithParam<test_mode> {
protected:
  void SetUp() override {
    if (!is_threads(GetParam()) && probe_engine(engine_choice::automatic).engine != engine_choice::uring)
      GTEST_SKIP() << probe_engine(engine_choice::automatic).message();
  }

  /// Opens a store whose engine injects `rules`.
  void open(std::vector<fault_rule> rules, uint32_t timeout_ms = 30'000) {
    nvme_options o;
    o.file = dir.file();
    apply(GetParam(), o);
    o.queue_depth = 4;
    o.io_timeout_ms = timeout_ms;
    o.decorate = [this, rules](std::unique_ptr<page_file> inner) {
      auto f = std::make_unique<faulty_page_file>(std::move(inner), rules);
      faults = f.get();
      return f;
    };
    auto s = slot_store::open(o, blocks, pool.region());
    ASSERT_TRUE(s) << describe(s.error());
    store = std::move(*s);
  }

  /// Fills DRAM slots with blocks 0..7 and writes them to NVMe slots 0..7.
  job_result write_all() {
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < blocks; ++i) {
      fill_block(pool.slot(i), block_bytes, i);
      sums[i] = pool.checksum(i);
      pages.push_back({i, i, hash_of(i), 0});
    }
    return run(*store, make_job(page_op::write, 1, pages));
  }

  /// Reads every block into zeroed DRAM; returns how many read back exactly.
  /// Fails the test if any read reports ok over wrong bytes.
  uint32_t read_all_exact(job_result* out = nullptr) {
    std::memset(pool.slot(0), 0, pool.layout.total_bytes());
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < blocks; ++i)
      pages.push_back({i, i, hash_of(i), 0});
    auto r = run(*store, make_job(page_op::read, 2, pages));
    uint32_t exact = 0;
    std::vector<std::byte> expected(block_bytes);
    for (uint32_t i = 0; i < blocks; ++i) {
      if (r.pages[i])
        continue;
      fill_block(expected.data(), block_bytes, i);
      EXPECT_EQ(std::memcmp(pool.slot(i), expected.data(), block_bytes), 0) << "wrong bytes returned for block " << i;
      ++exact;
    }
    EXPECT_EQ(r.bytes, exact * block_bytes);
    if (out)
      *out = r;
    return exact;
  }

  /// Zero blocks lost: DRAM still holds every block the write job failed.
  void expect_failed_writes_kept_in_dram(const job_result& w) {
    for (uint32_t i = 0; i < blocks; ++i) {
      if (w.pages[i]) {
        EXPECT_EQ(pool.checksum(i), sums[i]) << "DRAM copy of block " << i << " changed";
      }
    }
  }

  /// File offset of NVMe slot s's payload: rules aimed at one block's reads and writes.
  uint64_t at(uint32_t s) const {
    return slot_geometry{block_bytes, blocks, is_split(GetParam()) ? slot_layout::split : slot_layout::adjacent}
        .payload_offset(s);
  }

  temp_dir dir;
  dram_pool pool{blocks, 2, block_bytes / 2};
  uint64_t sums[blocks] = {};
  faulty_page_file* faults = nullptr;
  std::unique_ptr<slot_store> store;
};

} // namespace

TEST_P(fault_test, eio_on_one_write_is_retried) {
  open({{fault::eio, io_dir::write, 3, 1}});
  auto w = write_all();
  ASSERT_FALSE(w.error) << describe(w.error);
  EXPECT_EQ(read_all_exact(), blocks);
  auto m = store->metrics();
  EXPECT_EQ(m.io_errors, 1u);
  EXPECT_EQ(m.retries, 1u);
  EXPECT_EQ(m.write_failures, 0u);
  EXPECT_EQ(faults->injected(), 1u);
}

TEST_P(fault_test, persistent_eio_reports_and_keeps_blocks_in_dram) {
  open({{fault::eio, io_dir::write, 0, forever}});
  auto w = write_all();
  ASSERT_TRUE(is(w.error, errc::io_failure));
  EXPECT_EQ(describe(w.error), "NVMe tier: write of NVMe slot 0: Input/output error (EIO)");
  EXPECT_EQ(w.bytes, 0u);
  expect_failed_writes_kept_in_dram(w);
  auto m = store->metrics();
  EXPECT_EQ(m.write_failures, blocks);
  EXPECT_EQ(m.io_errors, 3 * blocks); // 1 try + 2 retries each
  EXPECT_EQ(m.retries, 2 * blocks);
  EXPECT_TRUE(store->manifest().empty());
  EXPECT_EQ(read_all_exact(), 0u); // nothing on disk: every read is a miss, none is wrong
}

TEST_P(fault_test, enospc_is_reported_as_no_capacity) {
  open({{fault::enospc, io_dir::write, 0, forever, 0, at(2)}});
  auto w = write_all();
  ASSERT_TRUE(is(w.error, errc::no_capacity));
  EXPECT_EQ(describe(w.error), "NVMe tier: write of NVMe slot 2: No space left on device (ENOSPC)");
  ASSERT_TRUE(w.pages[2]);
  expect_failed_writes_kept_in_dram(w);
  uint32_t failed = 0;
  for (const auto& e : w.pages)
    failed += e ? 1 : 0;
  // Block 2 fails on every attempt; the others pass.
  EXPECT_EQ(failed, 1u);
  EXPECT_TRUE(w.pages[2]);
  EXPECT_EQ(store->metrics().enospc, 3u);
  EXPECT_EQ(store->metrics().write_failures, 1u);
  EXPECT_EQ(read_all_exact(), blocks - 1);
}

TEST_P(fault_test, short_write_and_short_read_are_retried) {
  open({{fault::short_io, io_dir::write, 1, 1}, {fault::short_io, io_dir::read, 5, 1}});
  ASSERT_FALSE(write_all().error);
  EXPECT_EQ(read_all_exact(), blocks);
  auto m = store->metrics();
  EXPECT_EQ(m.short_ios, 2u);
  EXPECT_EQ(m.retries, 2u);
  EXPECT_EQ(m.write_failures + m.read_failures, 0u);
}

TEST_P(fault_test, corruption_on_read_is_caught_by_the_checksum) {
  // Block 2's read is corrupted once (the retry passes); block 4's on both attempts.
  open({{fault::corrupt, io_dir::read, 0, 1, 0, at(2)}, {fault::corrupt, io_dir::read, 0, 2, 0, at(4)}});
  ASSERT_FALSE(write_all().error);
  job_result r;
  EXPECT_EQ(read_all_exact(&r), blocks - 1);
  ASSERT_TRUE(is(r.error, errc::corrupted));
  auto m = store->metrics();
  EXPECT_EQ(m.corrupted_reads, 3u);
  EXPECT_EQ(m.read_failures, 1u);
  EXPECT_EQ(read_all_exact(), blocks); // the disk itself was fine
}

TEST_P(fault_test, corruption_on_write_is_a_miss_after_restart) {
  open({{fault::corrupt, io_dir::write, 0, 1, 0, at(6)}});
  auto w = write_all();
  ASSERT_FALSE(w.error); // the device said yes: silent corruption of the header on disk
  // This process knows the payload's checksum: the payload itself is intact and reads back.
  EXPECT_EQ(read_all_exact(), blocks);
  // A restart rebuilds the manifest from the headers: slot 6's is damaged, so block 6 is a miss.
  store.reset();
  open({});
  EXPECT_EQ(store->report().recovered, blocks - 1);
  EXPECT_EQ(store->report().damaged, 1u);
  job_result r;
  EXPECT_EQ(read_all_exact(&r), blocks - 1);
  ASSERT_TRUE(r.pages[6]);
  EXPECT_EQ(describe(r.pages[6]),
            "NVMe tier: read of NVMe slot 6 is a miss: its header is damaged (torn or corrupted write)");
}

TEST_P(fault_test, slow_device_changes_nothing_but_time) {
  open({{fault::slow, io_dir::write, 0, 3, 30}, {fault::slow, io_dir::read, 0, 3, 30}});
  ASSERT_FALSE(write_all().error);
  EXPECT_EQ(read_all_exact(), blocks);
  auto m = store->metrics();
  EXPECT_EQ(m.pages_written, blocks);
  EXPECT_EQ(m.retries + m.timeouts, 0u);
  EXPECT_EQ(faults->injected(), 6u);
}

TEST_P(fault_test, lost_completion_times_out_and_is_retried) {
  open({{fault::lost, io_dir::write, 5, 1}}, /*timeout_ms=*/100);
  auto w = write_all();
  ASSERT_FALSE(w.error) << describe(w.error);
  EXPECT_EQ(read_all_exact(), blocks);
  auto m = store->metrics();
  EXPECT_EQ(m.timeouts, 1u);
  EXPECT_EQ(m.retries, 1u);
  EXPECT_EQ(m.late_completions, 0u);
  faults->release_lost(); // the device answers at last: ignored, its lane freed
  EXPECT_EQ(store->metrics().late_completions, 1u);
  EXPECT_EQ(read_all_exact(), blocks);
}

TEST_P(fault_test, eio_on_read_goes_to_the_recompute_path) {
  open({{fault::eio, io_dir::read, 0, forever}});
  ASSERT_FALSE(write_all().error);
  job_result r;
  EXPECT_EQ(read_all_exact(&r), 0u);
  ASSERT_TRUE(is(r.error, errc::io_failure));
  EXPECT_EQ(store->metrics().read_failures, blocks);
  EXPECT_EQ(store->manifest().size(), blocks); // the blocks are still on disk
}

INSTANTIATE_TEST_SUITE_P(engines, fault_test, all_modes, mode_name);
