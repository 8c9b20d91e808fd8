#include "sim/simulation.hpp"

#include "sim/sim_backend.hpp"
#include "sim/virtual_clock.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <algorithm>
#include <chrono>

namespace kvtier::sim {
namespace {

// How many scheduler events run between progress reports.
constexpr uint64_t progress_every = 1u << 15;

} // namespace

std::vector<sim_request> requests_from(trace&& t) {
  std::vector<sim_request> out;
  out.reserve(t.requests.size());
  for (auto& r : t.requests) {
    request_spec spec;
    spec.id = r.id + 1;
    spec.prompt_tokens = r.input_tokens;
    spec.output_tokens = std::max<uint32_t>(1, r.output_tokens);
    spec.external_ids = std::move(r.block_ids);
    spec.external_block_tokens = r.block_tokens;
    spec.tenant = r.tenant;
    out.push_back({r.arrival_s, std::move(spec)});
  }
  return out;
}

bool clock_saturated(const run_result& result) {
  return result.simulated_seconds >= max_virtual_seconds;
}

run_result run_simulation(const config& cfg, std::vector<sim_request> requests, const sim_options& options) {
  auto wall_start = std::chrono::steady_clock::now();
  run_result result;
  result.requests_total = requests.size();
  result.metrics.record_steps = options.record_steps;

  caf::actor_system_config sys_cfg;
  sys_cfg.set("scheduler.policy", caf::atom("testing"));
  sys_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{sys_cfg};
  system.await_actors_before_shutdown(false);
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());
  auto& clock = sched.clock();

  // Simulated, whatever backend the file names: a real run's remote tier
  // ([remote], in the NVMe tier's place) is the cluster simulation's to model.
  config simulated = cfg;
  simulated.backend = backend_kind::sim;
  run_driver driver(system, simulated, result);
  sim_backend backend(system, driver.context().cfg, driver.epoch());
  if (options.record_timeline)
    backend.record_timeline(&result.timeline);
  driver.start(backend);
  driver.schedule_arrivals(std::move(requests)); // the specs now live in the clock's queue

  uint64_t next_report = progress_every;
  for (;;) {
    result.messages += sched.run();
    if (options.progress && result.messages >= next_report) {
      next_report = result.messages + progress_every;
      options.progress(seconds_since(driver.context(), clock.now()), result.metrics.scheduler.requests_completed,
                       result.requests_total);
    }
    if (!sched.trigger_timeout())
      break;
  }
  result.simulated_seconds = seconds_since(driver.context(), clock.now());
  if (options.progress)
    options.progress(result.simulated_seconds, result.metrics.scheduler.requests_completed, result.requests_total);

  driver.collect_links();
  driver.stop();
  sched.run();
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

} // namespace kvtier::sim
