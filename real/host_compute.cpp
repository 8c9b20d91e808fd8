#include "real/host_compute.hpp"

#include <caf/send.hpp>

#include <chrono>
#include <cmath>

namespace kvtier {

host_compute_port::host_compute_port(const config& cfg, double time_scale)
  : costs_(cfg), time_scale_(time_scale), worker_([this] { run(); }) {}

host_compute_port::~host_compute_port() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

void host_compute_port::execute(const step_plan& plan, caf::actor notify, uint64_t tag) {
  step_shape shape;
  for (const auto& s : plan.sequences)
    shape.add(s.new_tokens, s.context_tokens);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    jobs_.push_back({costs_.step_seconds(shape) * time_scale_, std::move(notify), tag});
  }
  wake_.notify_one();
}

void host_compute_port::run() {
  for (;;) {
    job next;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_ && jobs_.empty())
        return;
      next = std::move(jobs_.front());
      jobs_.pop_front();
    }
    auto start = std::chrono::steady_clock::now();
    if (next.seconds > 0)
      std::this_thread::sleep_until(start + std::chrono::duration<double>(next.seconds));
    auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    caf::anon_send(next.notify, completion_atom::value, next.tag, static_cast<uint64_t>(std::llround(took * 1e9)),
                   caf::error{});
  }
}

} // namespace kvtier
