// worker_queue: order, exactly-once handling, and deterministic shutdown.

#include "runtime/worker_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <memory>
#include <vector>

using kvtier::worker_queue;

TEST(worker_queue, one_thread_handles_items_in_push_order) {
  std::vector<int> seen; // touched by the queue's one thread only, read after drain()
  worker_queue<int> q(1, [&](int& i) { seen.push_back(i); });
  for (int i = 0; i < 1000; ++i)
    ASSERT_TRUE(q.push(i));
  q.drain();
  ASSERT_EQ(seen.size(), 1000u);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(seen[i], i);
  EXPECT_EQ(q.pending(), 0u);
}

TEST(worker_queue, many_threads_handle_every_item_exactly_once) {
  std::vector<std::atomic<int>> handled(10000);
  worker_queue<int> q(4, [&](int& i) { handled[i].fetch_add(1); });
  EXPECT_EQ(q.threads(), 4u);
  for (int i = 0; i < 10000; ++i)
    ASSERT_TRUE(q.push(i));
  q.drain();
  for (int i = 0; i < 10000; ++i)
    ASSERT_EQ(handled[i].load(), 1) << i;
}

TEST(worker_queue, close_finishes_what_was_accepted_and_refuses_the_rest) {
  std::promise<void> gate;
  auto opened = gate.get_future().share();
  std::vector<int> seen;
  worker_queue<int> q(1, [&](int& i) {
    if (i == 0)
      opened.wait(); // hold the thread so that 1 and 2 are still queued when close() begins
    seen.push_back(i);
  });
  ASSERT_TRUE(q.push(0));
  ASSERT_TRUE(q.push(1));
  ASSERT_TRUE(q.push(2));
  std::thread closer([&] { q.close(); });
  int accepted_meanwhile = 0;
  while (q.push(99)) // true until close() has begun; each accepted item must still be handled
    ++accepted_meanwhile;
  gate.set_value();
  closer.join();
  std::vector<int> want{0, 1, 2};
  want.insert(want.end(), accepted_meanwhile, 99);
  EXPECT_EQ(seen, want);
  EXPECT_FALSE(q.push(7));
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(seen.size(), want.size()); // 7 was never handled
}

TEST(worker_queue, destruction_drains_the_queue) {
  std::atomic<int> handled{0};
  {
    worker_queue<std::unique_ptr<int>> q(2, [&](std::unique_ptr<int>& p) { handled += *p; });
    for (int i = 1; i <= 100; ++i)
      ASSERT_TRUE(q.push(std::make_unique<int>(i)));
  }
  EXPECT_EQ(handled.load(), 5050);
}

TEST(worker_queue, a_handler_may_push_onto_its_own_queue) {
  std::vector<int> seen;
  worker_queue<int>* self = nullptr;
  worker_queue<int> q(1, [&](int& i) {
    seen.push_back(i);
    if (i < 10) {
      EXPECT_TRUE(self->push(i + 1));
    }
  });
  self = &q;
  ASSERT_TRUE(q.push(0));
  q.drain(); // the next item is queued before its predecessor's handler returns
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(worker_queue, every_thread_runs_the_start_hook_before_any_item) {
  thread_local bool started = false;
  std::atomic<int> hooks{0}, unprepared{0};
  worker_queue<int> q(
      3, [&](int&) { unprepared += started ? 0 : 1; },
      [&] {
        started = true;
        ++hooks;
      });
  for (int i = 0; i < 300; ++i)
    ASSERT_TRUE(q.push(i));
  q.close();
  EXPECT_EQ(hooks.load(), 3);
  EXPECT_EQ(unprepared.load(), 0);
}

TEST(worker_queue, push_all_queues_a_batch_in_order) {
  std::vector<int> seen;
  worker_queue<int> q(1, [&](int& i) { seen.push_back(i); });
  std::vector<int> batch{5, 3, 8, 1};
  ASSERT_TRUE(q.push_all(batch.begin(), batch.end()));
  q.drain();
  EXPECT_EQ(seen, batch);
  q.close();
  EXPECT_FALSE(q.push_all(batch.begin(), batch.end()));
  EXPECT_EQ(seen, batch);
}
