#include "io/calibration.hpp"
#include "io/slot_store.hpp"
#include "runtime/config.hpp"
#include "runtime/hardware_profile.hpp"
#include "io_test_util.hpp"
#include "runtime/error.hpp"
#include "tests/child_process.hpp"

#include <gtest/gtest.h>

#include <mutex>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::io;
using namespace kvtier::io::test;

namespace {

// 4 layers x 16 KiB: a 64 KiB block, enough to span many sectors and cheap to move.
constexpr uint32_t layers = 4;
constexpr uint64_t layer_bytes = 16 << 10;
constexpr uint32_t nvme_slots = 32;

class store_test : public ::testing::TestWithParam<test_mode> {
protected:
  void SetUp() override {
    if (!is_threads(GetParam()) && probe_engine(engine_choice::automatic).engine != engine_choice::uring)
      GTEST_SKIP() << probe_engine(engine_choice::automatic).message();
  }
  nvme_options options() const {
    nvme_options o;
    o.file = dir.file();
    apply(GetParam(), o);
    o.queue_depth = 8;
    return o;
  }
  std::unique_ptr<slot_store> open(const dram_pool& pool, nvme_options o) {
    auto s = slot_store::open(o, nvme_slots, pool.region());
    EXPECT_TRUE(s) << describe(s.error());
    return s ? std::move(*s) : nullptr;
  }
  std::unique_ptr<slot_store> open(const dram_pool& pool) { return open(pool, options()); }

  temp_dir dir;
};

/// Writes blocks 0..n-1 (version v) from DRAM slot i to NVMe slot `first + i`.
job_result write_blocks(slot_store& s, dram_pool& pool, uint32_t first, uint32_t n, uint64_t v = 0) {
  std::vector<page_transfer> pages;
  for (uint32_t i = 0; i < n; ++i) {
    fill_block(pool.slot(i), pool.block_bytes(), first + i, v);
    pages.push_back({i, first + i, hash_of(first + i, v), 0});
  }
  return run(s, make_job(page_op::write, 100 + first, pages));
}

} // namespace

TEST_P(store_test, write_then_read_back_every_byte) {
  dram_pool pool(16, layers, layer_bytes);
  auto s = open(pool);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->report().formatted);
  EXPECT_EQ(s->report().format_why, "new file");
  if (GetParam() == test_mode::uring_split_fixed) { // the DRAM pool as one buffer, the header arena as another
    EXPECT_NE(s->report().engine.find("2 registered buffers"), std::string::npos) << s->report().engine;
  }
  if (is_threads(GetParam())) {
    EXPECT_EQ(s->report().engine, "pread/pwrite thread pool (8 threads)");
  }
  EXPECT_EQ(s->geometry().layout, is_split(GetParam()) ? slot_layout::split : slot_layout::adjacent);
  for (uint32_t first : {0u, 16u}) {
    auto w = write_blocks(*s, pool, first, 16);
    ASSERT_FALSE(w.error) << describe(w.error);
    EXPECT_EQ(w.tag, 100u + first);
    EXPECT_EQ(w.bytes, 16 * pool.block_bytes());
  }
  // Read all 32 back, 16 at a time into reversed DRAM slots, and compare every byte.
  std::vector<std::byte> expected(pool.block_bytes());
  for (uint32_t first : {0u, 16u}) {
    std::memset(pool.slot(0), 0, pool.layout.total_bytes());
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < 16; ++i)
      pages.push_back({15 - i, first + i, hash_of(first + i), 0});
    auto r = run(*s, make_job(page_op::read, 7, pages));
    ASSERT_FALSE(r.error) << describe(r.error);
    EXPECT_EQ(r.bytes, 16 * pool.block_bytes());
    ASSERT_EQ(r.pages.size(), 16u);
    for (uint32_t i = 0; i < 16; ++i) {
      fill_block(expected.data(), expected.size(), first + i);
      ASSERT_EQ(std::memcmp(pool.slot(15 - i), expected.data(), expected.size()), 0) << "block " << first + i;
      EXPECT_EQ(pool.checksum(15 - i), XXH3_64bits(expected.data(), expected.size()));
    }
  }
  auto m = s->metrics();
  EXPECT_EQ(m.pages_written, 32u);
  EXPECT_EQ(m.pages_read, 32u);
  EXPECT_EQ(m.retries + m.io_errors + m.corrupted_reads + m.short_ios + m.timeouts, 0u);
  EXPECT_EQ(s->write_counters().bytes, 32 * pool.block_bytes());
  EXPECT_EQ(s->write_counters().operations, 32u);
  EXPECT_EQ(s->read_counters().bytes, 32 * pool.block_bytes());
  EXPECT_GT(s->write_counters().busy_seconds, 0.0);
  EXPECT_EQ(s->manifest().size(), 32u);
  EXPECT_FALSE(s->flush());
}

TEST_P(store_test, reading_an_unwritten_or_other_block_is_a_miss) {
  dram_pool pool(2, layers, layer_bytes);
  auto s = open(pool);
  ASSERT_TRUE(s);
  ASSERT_FALSE(write_blocks(*s, pool, 3, 1).error);
  auto empty = run(*s, make_job(page_op::read, 1, {{0, 4, hash_of(4), 0}}));
  ASSERT_TRUE(is(empty.error, errc::corrupted));
  EXPECT_EQ(describe(empty.error), "NVMe tier: read of NVMe slot 4 is a miss: the slot holds no block");
  EXPECT_EQ(empty.bytes, 0u);
  auto other = run(*s, make_job(page_op::read, 2, {{0, 3, hash_of(3), 9}}));
  ASSERT_TRUE(is(other.error, errc::corrupted));
  EXPECT_NE(describe(other.error).find("salt 0, not"), std::string::npos) << describe(other.error);
  auto m = s->metrics();
  EXPECT_EQ(m.read_failures, 2u);
  EXPECT_EQ(m.manifest_misses, 2u); // answered by the manifest: no I/O, nothing to retry
  EXPECT_EQ(m.corrupted_reads + m.retries + m.pages_read, 0u);
  EXPECT_EQ(s->read_counters().operations, 0u);
}

TEST_P(store_test, restart_after_a_crash_finds_every_written_block) {
  dram_pool pool(16, layers, layer_bytes);
  pid_t child = kvtier::testing::fork_child();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child writes 20 blocks and dies without any shutdown.
    auto s = slot_store::open(options(), nvme_slots, pool.region());
    if (!s)
      _exit(2);
    auto a = write_blocks(**s, pool, 0, 16);
    auto b = write_blocks(**s, pool, 16, 4);
    _exit(a.error || b.error ? 3 : 0);
  }
  ASSERT_EQ(kvtier::testing::wait_child(child, "the writing child"), 0);
  std::memset(pool.slot(0), 0, pool.layout.total_bytes());
  auto s = open(pool);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().formatted);
  EXPECT_EQ(s->report().recovered, 20u);
  EXPECT_EQ(s->report().damaged, 0u);
  auto manifest = s->manifest();
  ASSERT_EQ(manifest.size(), 20u);
  for (uint32_t i = 0; i < 20; ++i) {
    EXPECT_EQ(manifest[i].nvme_slot, i);
    EXPECT_EQ(manifest[i].hash, hash_of(i));
  }
  std::vector<std::byte> expected(pool.block_bytes());
  for (uint32_t i = 0; i < 20; ++i) {
    auto r = run(*s, make_job(page_op::read, i, {{i % 16, i, hash_of(i), 0}}));
    ASSERT_FALSE(r.error) << describe(r.error);
    fill_block(expected.data(), expected.size(), i);
    ASSERT_EQ(std::memcmp(pool.slot(i % 16), expected.data(), expected.size()), 0) << "block " << i;
  }
  // New writes continue the sequence after the recovered ones.
  ASSERT_FALSE(write_blocks(*s, pool, 20, 1).error);
  EXPECT_GT(s->lookup(20)->sequence, s->lookup(19)->sequence);
}

TEST_P(store_test, crash_in_the_middle_of_writes_never_yields_wrong_bytes) {
  dram_pool pool(16, layers, layer_bytes);
  pid_t child = kvtier::testing::fork_child();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto s = slot_store::open(options(), nvme_slots, pool.region());
    if (!s || write_blocks(**s, pool, 0, 16).error)
      _exit(2);
    // Overwrite all 16 with version 1 and die while the writes are in flight.
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < 16; ++i) {
      fill_block(pool.slot(i), pool.block_bytes(), i, 1);
      pages.push_back({i, i, hash_of(i, 1), 0});
    }
    (*s)->submit(make_job(page_op::write, 1, pages), [](job_result) {});
    _exit(0);
  }
  ASSERT_EQ(kvtier::testing::wait_child(child, "the writing child"), 0);
  auto s = open(pool);
  ASSERT_TRUE(s);
  std::vector<std::byte> expected(pool.block_bytes());
  uint32_t found = 0;
  for (uint32_t i = 0; i < 16; ++i) {
    uint32_t versions = 0;
    for (uint64_t v : {1u, 0u}) {
      auto r = run(*s, make_job(page_op::read, i, {{0, i, hash_of(i, v), 0}}));
      if (r.error) {
        ASSERT_TRUE(is(r.error, errc::corrupted)) << describe(r.error);
        continue;
      }
      fill_block(expected.data(), expected.size(), i, v);
      ASSERT_EQ(std::memcmp(pool.slot(0), expected.data(), expected.size()), 0) << "slot " << i << " version " << v;
      ++versions;
    }
    EXPECT_LE(versions, 1u) << "slot " << i;
    found += versions;
  }
  // Whatever was found is in the manifest (a valid header over a torn payload is listed but reads as a miss).
  EXPECT_LE(found, s->manifest().size());
}

TEST_P(store_test, torn_page_on_disk_is_detected_and_a_miss) {
  dram_pool pool(16, layers, layer_bytes);
  slot_geometry g;
  {
    auto s = open(pool);
    ASSERT_TRUE(s);
    ASSERT_FALSE(write_blocks(*s, pool, 0, 16).error);
    g = s->geometry();
  }
  // Tear slot 3's payload (half a page of zeros) and slot 9's header.
  int fd = ::open(dir.file().c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<char> zeros(2048, 0);
  ASSERT_EQ(::pwrite(fd, zeros.data(), zeros.size(), g.payload_offset(3) + 8192), 2048);
  ASSERT_EQ(::pwrite(fd, zeros.data(), 16, g.header_offset(9) + 20), 16);
  ::close(fd);
  auto s = open(pool);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->report().recovered, 15u);
  EXPECT_EQ(s->report().damaged, 1u);
  EXPECT_FALSE(s->lookup(9));
  auto torn = run(*s, make_job(page_op::read, 3, {{0, 3, hash_of(3), 0}}));
  ASSERT_TRUE(is(torn.error, errc::corrupted));
  EXPECT_EQ(describe(torn.error),
            "NVMe tier: read of NVMe slot 3 is a miss: its payload fails the checksum (torn or corrupted page)");
  auto header = run(*s, make_job(page_op::read, 9, {{0, 9, hash_of(9), 0}}));
  ASSERT_TRUE(is(header.error, errc::corrupted));
  EXPECT_EQ(describe(header.error),
            "NVMe tier: read of NVMe slot 9 is a miss: its header is damaged (torn or corrupted write)");
  // A multi-page job reports per page; the good pages arrive intact.
  auto mixed =
      run(*s, make_job(page_op::read, 4, {{0, 2, hash_of(2), 0}, {1, 3, hash_of(3), 0}, {2, 4, hash_of(4), 0}}));
  ASSERT_TRUE(is(mixed.error, errc::corrupted));
  EXPECT_FALSE(mixed.pages[0]);
  EXPECT_TRUE(mixed.pages[1]);
  EXPECT_FALSE(mixed.pages[2]);
  EXPECT_EQ(mixed.bytes, 2 * pool.block_bytes());
  std::vector<std::byte> expected(pool.block_bytes());
  fill_block(expected.data(), expected.size(), 4);
  EXPECT_EQ(std::memcmp(pool.slot(2), expected.data(), expected.size()), 0);
  EXPECT_EQ(s->metrics().read_failures, 3u);
}

TEST_P(store_test, buffered_io_passes_the_same_round_trip) {
  // Buffered I/O also takes blocks that are not a multiple of 4 KiB.
  dram_pool pool(4, 3, 1000);
  auto o = options();
  o.direct_io = false;
  auto s = open(pool, o);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->report().probe.direct_io);
  EXPECT_EQ(s->report().probe.direct_why, "direct_io = false in the configuration");
  ASSERT_FALSE(write_blocks(*s, pool, 5, 4).error);
  std::memset(pool.slot(0), 0, pool.layout.total_bytes());
  auto r = run(*s, make_job(page_op::read, 1, {{0, 5, hash_of(5), 0}, {3, 8, hash_of(8), 0}}));
  ASSERT_FALSE(r.error) << describe(r.error);
  EXPECT_EQ(r.bytes, 6000u);
  std::vector<std::byte> expected(3000);
  fill_block(expected.data(), 3000, 5);
  EXPECT_EQ(std::memcmp(pool.slot(0), expected.data(), 3000), 0);
  fill_block(expected.data(), 3000, 8);
  EXPECT_EQ(std::memcmp(pool.slot(3), expected.data(), 3000), 0);
  // The neighbours of the read slots were not touched.
  for (uint32_t i : {1u, 2u})
    for (uint64_t b = 0; b < 3000; ++b)
      ASSERT_EQ(pool.slot(i)[b], std::byte{0});
}

TEST_P(store_test, misaligned_or_oversized_requests_are_rejected) {
  dram_pool odd(2, 3, 1000);
  auto o = options();
  auto a = slot_store::open(o, nvme_slots, odd.region());
  ASSERT_FALSE(a);
  EXPECT_TRUE(is(a.error(), errc::invalid_argument));
  EXPECT_EQ(describe(a.error()),
            "NVMe tier: misaligned DRAM region for O_DIRECT: block of 3000 bytes at address 0 "
            "past a 4 KiB boundary; both must be multiples of 4096 (or set direct_io = false)");
  dram_pool pool(4, layers, layer_bytes);
  dram_region shifted{pool.mem.get() + 512, {slot_order::block_major, 2, layers, layer_bytes}};
  auto b = slot_store::open(o, nvme_slots, shifted);
  ASSERT_FALSE(b);
  EXPECT_NE(describe(b.error()).find("at address 512 past a 4 KiB boundary"), std::string::npos);
  dram_region huge{pool.mem.get(), {slot_order::block_major, 1, 3, 512ull << 20}};
  auto c = slot_store::open(o, nvme_slots, huge);
  ASSERT_FALSE(c);
  EXPECT_EQ(describe(c.error()),
            "NVMe tier: block of 1610612736 bytes is oversized: at most 1073741824 (1 GiB) per block");
  dram_region layered{pool.mem.get(), {slot_order::layer_major, 4, layers, layer_bytes}};
  EXPECT_FALSE(slot_store::open(o, nvme_slots, layered));

  auto s = open(pool);
  ASSERT_TRUE(s);
  auto reject = [&](page_op op, std::vector<page_transfer> pages) {
    auto r = run(*s, make_job(op, 42, std::move(pages)));
    EXPECT_TRUE(is(r.error, errc::invalid_argument));
    EXPECT_EQ(r.bytes, 0u);
    return describe(r.error);
  };
  EXPECT_EQ(reject(page_op::write, {{0, 1, hash_of(1), 0}, {1, 32, hash_of(2), 0}}),
            "NVMe tier: job 42 page 1: NVMe slot 32 is outside the file's 32 slots");
  EXPECT_EQ(reject(page_op::read, {{4, 1, hash_of(1), 0}}),
            "NVMe tier: job 42 page 0: DRAM slot 4 is outside the pool's 4 slots");
  EXPECT_EQ(reject(page_op::write, {{0, 6, hash_of(1), 0}, {1, 6, hash_of(2), 0}}),
            "NVMe tier: job 42 page 1: NVMe slot 6 appears twice in one job");
  EXPECT_EQ(reject(page_op::write, {{0, 6, block_hash{}, 0}}),
            "NVMe tier: job 42 page 0: a block written to NVMe needs its hash");
  auto m = s->metrics();
  EXPECT_EQ(m.rejected_jobs, 4u);
  EXPECT_EQ(m.pages_written + m.pages_read, 0u);
  EXPECT_TRUE(s->manifest().empty()); // nothing reached the disk
}

namespace {

// Forwards to the real engine and records each batch it is handed: (direction, requests).
class recording_page_file final : public page_file {
public:
  explicit recording_page_file(std::unique_ptr<page_file> inner) : inner_(std::move(inner)) {}
  std::string describe() const override { return inner_->describe(); }
  void set_callback(raw_callback cb) override { inner_->set_callback(std::move(cb)); }
  void submit(std::span<const raw_io> batch) override {
    {
      std::lock_guard lock{mutex_};
      batches_.emplace_back(batch.empty() ? io_dir::read : batch[0].dir, batch.size());
    }
    inner_->submit(batch);
  }
  std::vector<std::pair<io_dir, size_t>> batches() const {
    std::lock_guard lock{mutex_};
    return batches_;
  }

private:
  std::unique_ptr<page_file> inner_;
  mutable std::mutex mutex_;
  std::vector<std::pair<io_dir, size_t>> batches_;
};

} // namespace

// A write's checksum is taken as it is issued: pages go to the engine once 1 MiB of them is
// hashed, so a 2 MiB write is issued alone (the disk starts after one hash, not a job's), while
// 64 KiB writes and reads of any size go in batches as large as the free lanes allow.
TEST_P(store_test, writes_are_issued_as_they_are_hashed_and_small_pages_in_batches) {
  for (uint64_t layer : {uint64_t{16} << 10, uint64_t{512} << 10}) { // 64 KiB and 2 MiB blocks
    temp_dir own;
    dram_pool pool(12, layers, layer);
    recording_page_file* recorder = nullptr;
    nvme_options o = options(); // 8 lanes
    o.file = own.file();
    o.decorate = [&recorder](std::unique_ptr<page_file> inner) {
      auto r = std::make_unique<recording_page_file>(std::move(inner));
      recorder = r.get();
      return r;
    };
    auto st = slot_store::open(o, 12, pool.region());
    ASSERT_TRUE(st) << describe(st.error());
    auto& s = **st;
    std::vector<page_transfer> pages;
    for (uint32_t i = 0; i < 12; ++i) {
      fill_block(pool.slot(i), pool.block_bytes(), i);
      pages.push_back({i, i, hash_of(i), 0});
    }
    ASSERT_FALSE(run(s, make_job(page_op::write, 1, pages)).error);
    auto writes = recorder->batches();
    ASSERT_FALSE(writes.empty());
    size_t written = 0;
    for (auto [dir, n] : writes) {
      EXPECT_EQ(dir, io_dir::write);
      written += n;
      if (layer == uint64_t{512} << 10) {
        EXPECT_EQ(n, 1u) << "a 2 MiB write waits for no other page's hash";
      }
    }
    EXPECT_EQ(written, 12u);
    if (layer == uint64_t{16} << 10) {
      EXPECT_EQ(writes.front().second, 8u) << "eight 64 KiB pages (512 KiB) hashed, then one batch";
    }
    std::memset(pool.slot(0), 0, pool.layout.total_bytes());
    auto read = run(s, make_job(page_op::read, 2, pages));
    ASSERT_FALSE(read.error);
    EXPECT_EQ(read.bytes, 12 * pool.block_bytes());
    auto all = recorder->batches();
    ASSERT_GT(all.size(), writes.size());
    EXPECT_EQ(all[writes.size()], std::make_pair(io_dir::read, size_t{8})); // the free lanes at once
    std::vector<std::byte> expected(pool.block_bytes());
    for (uint32_t i = 0; i < 12; ++i) {
      fill_block(expected.data(), pool.block_bytes(), i);
      EXPECT_EQ(std::memcmp(pool.slot(i), expected.data(), pool.block_bytes()), 0) << "block " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(engines, store_test, all_modes, mode_name);

TEST(io_calibration, profile_feeds_the_hardware_profile) {
  temp_dir dir;
  nvme_options o;
  o.queue_depth = 4;
  auto p = calibrate_nvme(o, dir.path.string(), 16 << 20, 0.05);
  ASSERT_TRUE(p) << describe(p.error());
  EXPECT_GT(p->read_iops, 0);
  EXPECT_GT(p->write_iops, 0);
  EXPECT_GT(p->read_gbps, 0);
  EXPECT_GT(p->write_gbps, 0);
  EXPECT_GT(p->latency_us, 0);
  EXPECT_EQ(p->queue_depth, 4u);
  EXPECT_FALSE(std::filesystem::exists(dir.file("calibrate.slots")));
  // The table reads back through the runtime's own profile parser.
  auto hw = parse_hardware_profile("name = \"x\"\n" + nvme_device_toml(*p), "calibrated.toml");
  ASSERT_TRUE(hw) << describe(hw.error());
  EXPECT_EQ(hw->nvme.queue_depth, 4u);
  EXPECT_NEAR(hw->nvme.read_iops, p->read_iops, 0.5);
  EXPECT_NEAR(hw->nvme.latency_us, p->latency_us, 0.05);
}
