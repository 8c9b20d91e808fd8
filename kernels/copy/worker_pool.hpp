#pragma once
// A fixed set of threads that run one parallel_for at a time (the caller's
// thread takes part). Each direction of a mover owns one, so the two
// directions never wait on each other's host work.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
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

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(size_t)>* job_ = nullptr; // GUARDED_BY(mutex_)
  size_t job_size_ = 0;                                // GUARDED_BY(mutex_)
  size_t next_ = 0;                                    // GUARDED_BY(mutex_)
  size_t finished_ = 0;                                // GUARDED_BY(mutex_)
  uint64_t generation_ = 0;                            // GUARDED_BY(mutex_)
  bool stop_ = false;                                  // GUARDED_BY(mutex_)
  std::vector<std::thread> threads_;
};

/// Default threads per direction: half the cores, 2..8.
uint32_t default_host_threads();

} // namespace kvtier::copy
