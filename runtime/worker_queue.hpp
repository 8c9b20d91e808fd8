#pragma once
// worker_queue<T>: a FIFO of items and the threads that handle them, the one
// primitive behind the copy engine's lanes, the NVMe thread-pool engine and
// the stand-in compute port (each had its own queue, condition variable and
// stop flag). Header-only and free of CAF, so kernels/ and io/ use it without
// depending on each other or on the actors.
//
// Invariants:
//  (1) Every item push() accepts is handled exactly once, by one thread. With
//      one thread, items are handled in the order they were pushed.
//  (2) After close() begins, push() refuses: it returns false and the item is
//      dropped unhandled. Nothing accepted is ever dropped.
//  (3) close() (and the destructor) lets the threads finish every accepted
//      item, then joins them: shutdown drains, deterministically.
//  (4) drain() returns once the queue is empty and no handler is running, so
//      every item accepted before the call has been handled.
//  (5) The handler runs without the queue's lock held, and the item is
//      destroyed before the lock is taken again: a handler (or an item's
//      destructor) may push() onto this or another queue.
//
// Threading: push(), drain(), pending() from any thread. A handler must not
// call drain() or close() on its own queue (it would wait for itself).

#include "runtime/mutex.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

namespace kvtier {

template <class T>
class worker_queue {
public:
  using handler = std::function<void(T&)>;

  /// Starts `threads` threads (at least one) that hand each item to `handle`.
  /// `on_thread_start` runs first on each of them (e.g. to pick a GPU).
  worker_queue(uint32_t threads, handler handle, std::function<void()> on_thread_start = {})
      : handle_(std::move(handle)), on_thread_start_(std::move(on_thread_start)) {
    threads_.reserve(threads == 0 ? 1 : threads);
    for (uint32_t i = 0; i < (threads == 0 ? 1 : threads); ++i)
      threads_.emplace_back([this] { loop(); });
  }
  ~worker_queue() { close(); }
  worker_queue(const worker_queue&) = delete;
  worker_queue& operator=(const worker_queue&) = delete;

  /// Queues `item`; false (item dropped) once close() has begun.
  bool push(T item) EXCLUDES(mutex_) {
    {
      mutex_lock lock{mutex_};
      if (closed_)
        return false;
      items_.push_back(std::move(item));
    }
    wake_.notify_one();
    return true;
  }

  /// Queues [first, last) under one lock, in order; false (nothing queued)
  /// once close() has begun.
  template <class It>
  bool push_all(It first, It last) EXCLUDES(mutex_) {
    size_t n = 0;
    {
      mutex_lock lock{mutex_};
      if (closed_)
        return false;
      for (; first != last; ++first, ++n)
        items_.push_back(*first);
    }
    if (n == 1)
      wake_.notify_one();
    else if (n > 1)
      wake_.notify_all();
    return true;
  }

  /// Waits until nothing is queued or being handled.
  void drain() EXCLUDES(mutex_) {
    mutex_lock lock{mutex_};
    while (!items_.empty() || running_ > 0)
      lock.wait(idle_);
  }

  /// Items queued plus items being handled.
  size_t pending() const EXCLUDES(mutex_) {
    mutex_lock lock{mutex_};
    return items_.size() + running_;
  }

  /// Refuses new items, lets the threads finish the queued ones, joins them.
  /// Idempotent.
  void close() EXCLUDES(mutex_) {
    {
      mutex_lock lock{mutex_};
      closed_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_)
      if (t.joinable())
        t.join();
  }

  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

private:
  void loop() EXCLUDES(mutex_) {
    if (on_thread_start_)
      on_thread_start_();
    mutex_lock lock{mutex_};
    for (;;) {
      while (!closed_ && items_.empty())
        lock.wait(wake_);
      if (items_.empty())
        return; // closed, and everything accepted is handled
      std::optional<T> item{std::move(items_.front())};
      items_.pop_front();
      ++running_;
      lock.unlock();
      handle_(*item);
      item.reset(); // (5): outside the lock
      lock.lock();
      if (--running_ == 0 && items_.empty())
        idle_.notify_all();
    }
  }

  const handler handle_;
  const std::function<void()> on_thread_start_;
  mutable mutex mutex_;
  std::condition_variable wake_; // an item arrived, or closing
  std::condition_variable idle_; // nothing queued or running
  std::deque<T> items_ GUARDED_BY(mutex_);
  size_t running_ GUARDED_BY(mutex_) = 0;
  bool closed_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_; // last: the threads start once the members above exist
};

} // namespace kvtier
