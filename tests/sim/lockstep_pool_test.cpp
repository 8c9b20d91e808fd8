// The cluster's fork-join: every item of every call runs exactly once, and
// what the items wrote is visible to the caller when the call returns.

#include "sim/lockstep_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace kvtier::sim;

TEST(lockstep_pool, every_item_of_every_call_runs_once_and_is_seen_by_the_caller) {
  for (uint32_t helpers : {0u, 1u, 3u}) {
    lockstep_pool pool{helpers};
    EXPECT_EQ(pool.threads(), helpers + 1);
    std::vector<uint64_t> sums(9, 0); // plain writes: the call's return must publish them
    std::atomic<uint64_t> runs{0};
    uint64_t want = 0;
    for (uint64_t call = 0; call < 2000; ++call) {
      const size_t n = 1 + call % 9;
      pool.parallel_for(n, [&](size_t i) {
        sums[i] += call * 10 + i;
        runs.fetch_add(1, std::memory_order_relaxed);
      });
      want += n;
      if (call % 500 == 0) // a pause long enough that helpers go to sleep
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_EQ(runs.load(), want) << helpers << " helpers";
    for (size_t i = 0; i < sums.size(); ++i) {
      uint64_t expected = 0;
      for (uint64_t call = 0; call < 2000; ++call)
        if (i < 1 + call % 9)
          expected += call * 10 + i;
      EXPECT_EQ(sums[i], expected) << "item " << i << ", " << helpers << " helpers";
    }
  }
}

TEST(lockstep_pool, threads_follow_the_ask_and_never_exceed_the_items) {
  EXPECT_EQ(lockstep_pool::threads_for(1, 8), 1u);
  EXPECT_EQ(lockstep_pool::threads_for(4, 8), 4u);
  EXPECT_EQ(lockstep_pool::threads_for(16, 8), 8u);
  EXPECT_EQ(lockstep_pool::threads_for(3, 0), 1u);
  EXPECT_GE(lockstep_pool::threads_for(0, 8), 1u);
  EXPECT_LE(lockstep_pool::threads_for(0, 8), 8u);
}

// A pool destroyed before (or right after) its helpers first ran must not
// wait for them forever.
TEST(lockstep_pool, a_pool_destroyed_at_once_joins_its_helpers) {
  for (int i = 0; i < 200; ++i) {
    lockstep_pool pool{3};
    if (i % 2)
      pool.parallel_for(1, [](size_t) {}); // runs on the caller: the ticket never moves
  }
  EXPECT_EQ(lockstep_pool{3}.threads(), 4u);
}

TEST(lockstep_pool, an_item_that_throws_reaches_the_caller_after_every_item_ran) {
  lockstep_pool pool{2};
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.parallel_for(6,
                                 [&](size_t i) {
                                   ran.fetch_add(1);
                                   if (i == 3)
                                     throw std::runtime_error("item 3");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 6);
  // The pool is usable afterwards, and the failure does not stick.
  ran = 0;
  pool.parallel_for(4, [&](size_t) { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 4);
}
