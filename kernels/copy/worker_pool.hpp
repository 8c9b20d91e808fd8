#pragma once
// A fixed set of threads that run one parallel_for at a time (the caller's
// thread takes part): fork-join over a range, not a queue (worker_queue.hpp
// is the queue). Each direction of a mover owns one, so the two
// directions never wait on each other's host work.

#include "runtime/mutex.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kvtier::copy {

class worker_pool {
public:
  /// `threads` helpers beside the caller (0 = the caller alone).
  explicit worker_pool(uint32_t threads);
  ~worker_pool();
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;

  /// Runs fn(i) for every i in [0, n); returns when all have run.
  // REQUIRES: one caller at a time.
  void parallel_for(size_t n, const std::function<void(size_t)>& fn);
  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()); }

private:
  void work(const std::function<void(size_t)>& fn, size_t n, uint64_t generation);
  void loop();

  kvtier::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t)>* job_ GUARDED_BY(mutex_) = nullptr;
  size_t job_size_ GUARDED_BY(mutex_) = 0;
  size_t next_ GUARDED_BY(mutex_) = 0;
  size_t finished_ GUARDED_BY(mutex_) = 0;
  uint64_t generation_ GUARDED_BY(mutex_) = 0;
  bool stop_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

/// Default threads per direction: half the cores, 2..8.
uint32_t default_host_threads();

} // namespace kvtier::copy
