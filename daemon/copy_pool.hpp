#pragma once
// Block copies off the io thread: a few threads that memcpy blocks between
// the DRAM tier and client regions, so the io thread keeps answering control
// requests (hello, exists, pin, stats) while multi-MiB gets and sets move.
//
// Invariants:
//  (1) run()'s `done` runs once, on a pool thread, after every copy of its
//      batch finished; the caller posts it back to its own thread.
//  (2) The destructor waits for every queued batch: nothing copies into or
//      out of memory after the pool is gone.
// Threading: run() may be called from any thread.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace kvtier::daemon {

struct block_copy {
  std::byte* to;
  const std::byte* from;
};

class copy_pool {
public:
  copy_pool(unsigned threads, std::uint64_t block_bytes);
  ~copy_pool();
  copy_pool(const copy_pool&) = delete;
  copy_pool& operator=(const copy_pool&) = delete;

  void run(std::vector<block_copy> copies, std::function<void()> done);
  /// Seconds the pool's threads spent copying, and the blocks they copied.
  double copy_seconds() const { return double(copy_ns_.load(std::memory_order_relaxed)) * 1e-9; }
  std::uint64_t blocks() const { return blocks_.load(std::memory_order_relaxed); }

private:
  struct threads;
  std::unique_ptr<threads> threads_;
  std::uint64_t block_bytes_;
  std::atomic<std::uint64_t> copy_ns_{0};
  std::atomic<std::uint64_t> blocks_{0};
};

} // namespace kvtier::daemon
