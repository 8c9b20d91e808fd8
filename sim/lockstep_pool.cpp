#include "sim/lockstep_pool.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier::sim {
namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// About 50 us of pause instructions, then about 1 ms of yields: a helper stays
// awake through the gaps between router decisions, and sleeps through
// anything longer (the run's set-up, its end, a serial stretch).
constexpr int spin_rounds = 2000;
constexpr int yield_rounds = 200;

} // namespace

lockstep_pool::lockstep_pool(uint32_t helpers) {
  threads_.reserve(helpers);
  for (uint32_t i = 0; i < helpers; ++i)
    threads_.emplace_back([this] { loop(); });
}

lockstep_pool::~lockstep_pool() {
  stop_.store(true, std::memory_order_release);
  ticket_.fetch_add(uint64_t{1} << 32, std::memory_order_acq_rel); // a new generation wakes every helper
  ticket_.notify_all();
  for (auto& t : threads_)
    t.join();
}

uint32_t lockstep_pool::threads_for(uint32_t asked, uint32_t items) {
  uint32_t want = asked > 0 ? asked : std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(want, 1u, std::max(1u, items));
}

bool lockstep_pool::claim(uint64_t generation, size_t& item) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if (generation_of(t) != generation)
      return false;
    const uint64_t n = (t >> 16) & 0xffff;
    const uint64_t next = t & 0xffff;
    if (next >= n)
      return false;
    if (ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      item = static_cast<size_t>(next);
      return true;
    }
  }
}

void lockstep_pool::run_items(uint64_t generation) {
  size_t item;
  while (claim(generation, item)) {
    // An item that throws still counts as done: the caller must not return
    // (and free fn) while another thread is inside it.
    try {
      (*fn_)(item);
    } catch (...) {
      mutex_lock lock{failure_mutex_};
      if (!failure_)
        failure_ = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_release);
  }
}

void lockstep_pool::parallel_for(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0)
    return;
  if (threads_.empty() || n == 1) {
    for (size_t i = 0; i < n; ++i)
      fn(i);
    return;
  }
  KVTIER_CHECK(n < (size_t{1} << 16), "lockstep_pool: at most 65535 items a call");
  // The previous call's items are all done, so no helper reads fn_ now.
  fn_ = &fn;
  done_.store(0, std::memory_order_relaxed);
  const uint64_t generation = generation_of(ticket_.load(std::memory_order_relaxed)) + 1;
  ticket_.store(generation << 32 | uint64_t{n} << 16, std::memory_order_release);
  ticket_.notify_all();
  run_items(generation);
  for (int round = 0; done_.load(std::memory_order_acquire) != n;)
    if (round < spin_rounds) {
      cpu_relax();
      ++round;
    } else {
      std::this_thread::yield();
    }
  std::exception_ptr failure;
  {
    mutex_lock lock{failure_mutex_};
    std::swap(failure, failure_);
  }
  if (failure)
    std::rethrow_exception(failure);
}

void lockstep_pool::loop() {
  // Generation 0 is the ticket before any call: a helper that starts late
  // still sees every later generation (and the destructor's) as new.
  uint64_t seen = 0;
  for (;;) {
    uint64_t t = ticket_.load(std::memory_order_acquire);
    for (int round = 0; generation_of(t) == seen && !stop_.load(std::memory_order_acquire);) {
      if (round < spin_rounds + yield_rounds)
        ++round;
      if (round < spin_rounds)
        cpu_relax();
      else if (round < spin_rounds + yield_rounds)
        std::this_thread::yield();
      else
        ticket_.wait(t, std::memory_order_acquire);
      t = ticket_.load(std::memory_order_acquire);
    }
    if (stop_.load(std::memory_order_acquire))
      return;
    seen = generation_of(t);
    run_items(seen);
  }
}

} // namespace kvtier::sim
