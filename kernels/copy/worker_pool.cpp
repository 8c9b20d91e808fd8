#include "kernels/copy/worker_pool.hpp"

#include <algorithm>

namespace kvtier::copy {

worker_pool::worker_pool(uint32_t threads) {
  threads_.reserve(threads);
  for (uint32_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { loop(); });
}

worker_pool::~worker_pool() {
  {
    mutex_lock lock{mutex_};
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    t.join();
}

// Claims indices one at a time: items are whole blocks (tens of KiB to MiB),
// so the lock is taken far less often than bytes are copied.
void worker_pool::work(const std::function<void(size_t)>& fn, size_t n, uint64_t generation) {
  for (;;) {
    size_t i;
    {
      mutex_lock lock{mutex_};
      // A helper that woke late must not take items of a newer job.
      if (generation_ != generation || next_ >= n)
        return;
      i = next_++;
    }
    fn(i);
    mutex_lock lock{mutex_};
    if (++finished_ == n)
      done_.notify_all();
  }
}

void worker_pool::parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0)
    return;
  if (threads_.empty() || n == 1) {
    for (size_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  uint64_t generation;
  {
    mutex_lock lock{mutex_};
    job_ = &fn;
    job_size_ = n;
    next_ = 0;
    finished_ = 0;
    generation = ++generation_;
  }
  wake_.notify_all();
  work(fn, n, generation);
  mutex_lock lock{mutex_};
  while (finished_ != n)
    lock.wait(done_);
  job_ = nullptr;
}

void worker_pool::loop() {
  uint64_t seen = 0;
  mutex_lock lock{mutex_};
  for (;;) {
    while (!stop_ && (job_ == nullptr || generation_ == seen))
      lock.wait(wake_);
    if (stop_)
      return;
    seen = generation_;
    const auto* fn = job_;
    size_t n = job_size_;
    lock.unlock();
    work(*fn, n, seen);
    lock.lock();
  }
}

uint32_t default_host_threads() {
  uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(cores / 2, 2u, 8u);
}

} // namespace kvtier::copy
