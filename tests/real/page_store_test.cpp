// The seam: nvme_page_store answers with one completion message per job.

#include "real/nvme_page_store.hpp"
#include "tests/io/io_test_util.hpp"
#include "runtime/error.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <gtest/gtest.h>

#include <chrono>

using namespace kvtier;
using namespace kvtier::io;
using namespace kvtier::io::test;

TEST(real_page_store, completion_messages_reach_the_actor) {
  temp_dir dir;
  dram_pool pool(4, 2, 8192);
  nvme_options o;
  o.file = dir.file();
  auto opened = nvme_page_store::open(o, 8, pool.region());
  ASSERT_TRUE(opened) << describe(opened.error());
  page_store& store = **opened;
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  for (uint32_t i = 0; i < 4; ++i)
    fill_block(pool.slot(i), pool.block_bytes(), i);
  store.submit(make_job(page_op::write, 11,
                        {{0, 4, hash_of(0), 0}, {1, 5, hash_of(1), 0}, {2, 6, hash_of(2), 0}, {3, 7, hash_of(3), 0}}),
               caf::actor_cast<caf::actor>(self));
  self->receive(
      [&](completion_atom, uint64_t tag, uint64_t bytes, caf::error err) {
        EXPECT_EQ(tag, 11u);
        EXPECT_EQ(bytes, 4 * 16384u);
        EXPECT_FALSE(err) << describe(err);
      },
      caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "the write's completion did not come within 10 s"; });
  std::memset(pool.slot(0), 0, pool.layout.total_bytes());
  // One good page, one whose hash does not match: the job is a miss.
  store.submit(make_job(page_op::read, 12, {{0, 6, hash_of(2), 0}}), caf::actor_cast<caf::actor>(self));
  store.submit(make_job(page_op::read, 13, {{1, 7, hash_of(9), 0}}), caf::actor_cast<caf::actor>(self));
  int seen = 0;
  for (int n = 0; n < 2; ++n)
    self->receive(
        [&](completion_atom, uint64_t tag, uint64_t bytes, caf::error err) {
          ++seen;
          if (tag == 12) {
            EXPECT_EQ(bytes, 16384u);
            EXPECT_FALSE(err);
          } else {
            EXPECT_EQ(tag, 13u);
            EXPECT_EQ(bytes, 0u);
            EXPECT_TRUE(is(err, errc::corrupted)) << describe(err);
          }
        },
        caf::after(std::chrono::seconds(10)) >> [] { FAIL() << "a read's completion did not come within 10 s"; });
  EXPECT_EQ(seen, 2);
  std::vector<std::byte> expected(16384);
  fill_block(expected.data(), expected.size(), 2);
  EXPECT_EQ(std::memcmp(pool.slot(0), expected.data(), expected.size()), 0);
  EXPECT_EQ(store.write_counters().bytes, 4 * 16384u);
  EXPECT_EQ(store.read_counters().bytes, 16384u);
  EXPECT_EQ(store.read_counters().operations, 1u);
}
