// The Redis remote tier against a redis-server on loopback: bytes round-trip,
// and a missing, damaged or unreachable block is a counted miss, never wrong
// bytes.

#include "remote/redis_block_store.hpp"

#include "runtime/error.hpp"
#include "redis_test_server.hpp"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace kvtier;
using namespace kvtier::remote;

namespace {

using kvtier::redis_testing::redis_server;
using server = kvtier::redis_testing::redis_test_server;

constexpr uint32_t slots = 8;
constexpr uint64_t block_bytes = 64 * 1024;

struct redis_block_store_test : ::testing::Test {
  void SetUp() override {
    if (access(redis_server, X_OK) != 0)
      GTEST_SKIP() << redis_server << " is not installed (Debian: redis-server): the remote tier is not tested";
    srv = std::make_unique<server>();
    ASSERT_TRUE(srv->ready()) << "redis-server did not answer on port " << srv->port();
    memory.resize(slots * block_bytes);
    for (size_t i = 0; i < memory.size(); ++i)
      memory[i] = std::byte(static_cast<uint8_t>(i * 131 + i / block_bytes));
    region.base = memory.data();
    region.layout = tier_layout{slot_order::block_major, slots, 1, block_bytes};
    redis_options o;
    o.port = srv->port();
    auto s = redis_block_store::connect(o, region);
    ASSERT_TRUE(s) << describe(s.error());
    store = std::move(*s);
  }

  io::job_result run(page_op op, std::vector<std::pair<uint32_t, uint64_t>> slot_and_hash, uint64_t salt = 7) {
    page_job job;
    job.op = op;
    job.tag = 42;
    for (auto [slot, h] : slot_and_hash)
      job.pages.push_back({slot, 0, block_hash{h, h * 3 + 1}, salt});
    std::promise<io::job_result> done;
    store->submit(std::move(job), [&](io::job_result r) { done.set_value(std::move(r)); });
    return done.get_future().get();
  }

  bool same(uint32_t a, uint32_t b) const {
    return std::memcmp(memory.data() + a * block_bytes, memory.data() + b * block_bytes, block_bytes) == 0;
  }

  std::unique_ptr<server> srv;
  std::vector<std::byte> memory;
  io::dram_region region;
  std::unique_ptr<redis_block_store> store;
};

} // namespace

TEST_F(redis_block_store_test, blocks_round_trip_byte_for_byte) {
  auto w = run(page_op::write, {{0, 100}, {1, 101}, {2, 102}});
  EXPECT_FALSE(w.error) << describe(w.error);
  EXPECT_EQ(w.bytes, 3 * block_bytes);
  EXPECT_EQ(w.tag, 42u);
  auto r = run(page_op::read, {{5, 102}, {6, 100}, {7, 101}});
  EXPECT_FALSE(r.error) << describe(r.error);
  EXPECT_EQ(r.bytes, 3 * block_bytes);
  EXPECT_TRUE(same(5, 2));
  EXPECT_TRUE(same(6, 0));
  EXPECT_TRUE(same(7, 1));
  EXPECT_EQ(store->write_counters().bytes, 3 * block_bytes);
  EXPECT_EQ(store->read_counters().bytes, 3 * block_bytes);
  EXPECT_EQ(store->read_counters().operations, 3u);
  auto f = store->faults();
  EXPECT_EQ(f.missing_reads + f.corrupted_reads + f.failed_reads + f.failed_writes, 0u);
}

TEST_F(redis_block_store_test, tenants_salts_keep_blocks_apart) {
  run(page_op::write, {{0, 100}}, 1);
  auto r = run(page_op::read, {{5, 100}}, 2);
  EXPECT_TRUE(is(r.error, errc::io_failure)) << describe(r.error);
  EXPECT_EQ(store->faults().missing_reads, 1u);
  EXPECT_FALSE(same(5, 0));
}

TEST_F(redis_block_store_test, a_missing_block_is_a_counted_miss) {
  auto r = run(page_op::read, {{5, 999}});
  EXPECT_TRUE(is(r.error, errc::io_failure)) << describe(r.error);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(store->faults().missing_reads, 1u);
}

TEST_F(redis_block_store_test, a_damaged_value_is_a_counted_miss_and_leaves_the_slot_alone) {
  run(page_op::write, {{0, 100}, {1, 101}});
  auto key = store->key_of(block_hash{100, 301}, 7);
  auto value = srv->get(key);
  ASSERT_EQ(value.size(), 48 + block_bytes);
  value[48 + 1000] ^= 0x01; // one bit of the payload
  srv->command(key, value);
  auto before = std::vector<std::byte>(memory.begin() + 5 * block_bytes, memory.begin() + 6 * block_bytes);
  auto r = run(page_op::read, {{5, 100}, {6, 101}});
  EXPECT_TRUE(is(r.error, errc::corrupted)) << describe(r.error);
  ASSERT_EQ(r.pages.size(), 2u);
  EXPECT_TRUE(is(r.pages[0], errc::corrupted));
  EXPECT_FALSE(r.pages[1]);
  EXPECT_EQ(r.bytes, block_bytes);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), memory.begin() + 5 * block_bytes));
  EXPECT_TRUE(same(6, 1));
  EXPECT_EQ(store->faults().corrupted_reads, 1u);
  // A value of another block's header under this key: corrupted as well.
  srv->command(key, srv->get(store->key_of(block_hash{101, 304}, 7)));
  EXPECT_TRUE(is(run(page_op::read, {{5, 100}}).error, errc::corrupted));
  EXPECT_EQ(store->faults().corrupted_reads, 2u);
}

TEST_F(redis_block_store_test, a_lost_server_fails_reads_as_counted_misses) {
  run(page_op::write, {{0, 100}});
  srv->stop();
  auto r = run(page_op::read, {{5, 100}});
  EXPECT_TRUE(is(r.error, errc::io_failure)) << describe(r.error);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(store->faults().failed_reads, 1u);
}

TEST_F(redis_block_store_test, a_block_in_another_payload_encoding_is_a_counted_miss) {
  // Same size, different bytes: an fp8 run (encoding 2) must not read an int8 run's (3) block as its own.
  redis_options fp8, int8;
  fp8.port = int8.port = srv->port();
  fp8.payload_encoding = 2;
  int8.payload_encoding = 3;
  auto writer = redis_block_store::connect(int8, region);
  auto reader = redis_block_store::connect(fp8, region);
  ASSERT_TRUE(writer && reader);
  store = std::move(*writer);
  EXPECT_FALSE(run(page_op::write, {{0, 100}, {1, 101}}).error);
  store = std::move(*reader);
  const std::vector<std::byte> before(memory.begin() + 5 * block_bytes, memory.begin() + 6 * block_bytes);
  auto r = run(page_op::read, {{5, 100}});
  EXPECT_TRUE(is(r.error, errc::io_failure)) << describe(r.error);
  EXPECT_EQ(r.bytes, 0u);
  EXPECT_EQ(store->faults().foreign_encoding_reads, 1u);
  EXPECT_EQ(store->faults().corrupted_reads, 0u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), memory.begin() + 5 * block_bytes));
  // The encoding it was written in reads it back byte for byte.
  auto again = redis_block_store::connect(int8, region);
  ASSERT_TRUE(again);
  store = std::move(*again);
  EXPECT_FALSE(run(page_op::read, {{6, 101}}).error);
  EXPECT_TRUE(same(6, 1));
}
