#pragma once
// A fork-join for the cluster simulation: `helpers` threads beside the caller
// run one parallel_for at a time over a few items (replicas). The cluster
// forks once per router decision, often tens of microseconds apart, where
// waking a thread blocked on a condition variable takes about as long as the
// work; so helpers spin, then yield, and block (an atomic wait) only after a
// long idle stretch. (kernels/copy/worker_pool.hpp is the blocking kind, for
// items of tens of KiB to MiB that dwarf a wake-up.)
//
// Invariants: items of one call run exactly once each, on any thread; a
// call returns after all of them finished, and everything they wrote is
// visible to the caller then; an exception from an item is rethrown to the
// caller then (the first one; the other items still ran). One caller at a time.

#include "runtime/mutex.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace kvtier::sim {

class lockstep_pool {
public:
  /// `helpers` threads beside the caller (0: the caller alone).
  explicit lockstep_pool(uint32_t helpers);
  ~lockstep_pool();
  lockstep_pool(const lockstep_pool&) = delete;
  lockstep_pool& operator=(const lockstep_pool&) = delete;

  /// Runs fn(i) for every i in [0, n); returns when all have run.
  // REQUIRES: n < 65536; one caller at a time.
  void parallel_for(size_t n, const std::function<void(size_t)>& fn);
  uint32_t threads() const { return static_cast<uint32_t>(threads_.size()) + 1; }

  /// Threads for `items` parallel items when `asked` (0: one per core).
  static uint32_t threads_for(uint32_t asked, uint32_t items);

private:
  // The ticket packs the call's generation (high 32 bits), its item count
  // (16) and the next unclaimed item (16): a claim is one compare-exchange
  // that also proves the call it claims from is still the current one.
  static uint64_t generation_of(uint64_t ticket) { return ticket >> 32; }
  bool claim(uint64_t generation, size_t& item);
  void run_items(uint64_t generation);
  void loop();

  std::atomic<uint64_t> ticket_{0};
  std::atomic<size_t> done_{0};
  std::atomic<bool> stop_{false};
  kvtier::mutex failure_mutex_;
  std::exception_ptr failure_ GUARDED_BY(failure_mutex_);
  // Written by the caller before it publishes a ticket; read only after a claim succeeded.
  const std::function<void(size_t)>* fn_ = nullptr;
  std::vector<std::thread> threads_;
};

} // namespace kvtier::sim
