#include "real/host_compute.hpp"

#include "runtime/check.hpp"

#include <caf/send.hpp>

#include <chrono>
#include <cmath>
#include <thread>

namespace kvtier {

host_compute_port::host_compute_port(const config& cfg, double time_scale)
    : costs_(cfg), time_scale_(time_scale), steps_(1, [this](job& next) { run(next); }) {
}

host_compute_port::~host_compute_port() = default;

void host_compute_port::execute(step_plan plan, caf::actor notify, uint64_t tag) {
  step_shape shape;
  for (const auto& s : plan.sequences)
    shape.add(s.new_tokens, s.context_tokens - s.dropped_tokens);
  bool queued = steps_.push({costs_.step_seconds(shape) * time_scale_, std::move(notify), tag});
  KVTIER_CHECK(queued, "a step executed on a compute port that is being destroyed");
}

void host_compute_port::run(const job& next) {
  auto start = std::chrono::steady_clock::now();
  if (next.seconds > 0)
    std::this_thread::sleep_until(start + std::chrono::duration<double>(next.seconds));
  auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  caf::anon_send(next.notify, completion_atom::value, next.tag, static_cast<uint64_t>(std::llround(took * 1e9)),
                 caf::error{});
}

} // namespace kvtier
