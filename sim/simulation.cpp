#include "sim/simulation.hpp"

#include "actors/graph.hpp"
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

bool clock_saturated(const sim_result& result) { return result.simulated_seconds >= max_virtual_seconds; }

sim_result run_simulation(const config& cfg, std::vector<sim_request> requests, const sim_options& options) {
  auto wall_start = std::chrono::steady_clock::now();
  sim_result result;
  result.requests_total = requests.size();
  result.metrics.record_steps = options.record_steps;

  caf::actor_system_config sys_cfg;
  sys_cfg.set("scheduler.policy", caf::atom("testing"));
  sys_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{sys_cfg};
  system.await_actors_before_shutdown(false);
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());
  auto& clock = sched.clock();
  auto epoch = clock.now();

  graph_context ctx;
  ctx.cfg = cfg;
  ctx.costs = std::make_unique<cost_model>(ctx.cfg);
  ctx.metrics = &result.metrics;
  ctx.epoch = epoch;
  sim_backend backend(system, ctx.cfg, epoch);
  ctx.io = &backend;
  if (options.record_timeline)
    backend.record_timeline(&result.timeline);
  auto graph = spawn_graph(system, ctx);

  auto target = caf::actor_cast<caf::strong_actor_ptr>(graph.scheduler);
  for (auto& r : requests)
    clock.schedule_message(epoch + virtual_duration(r.arrival_s), target,
                           caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, arrive_atom::value,
                                                     std::move(r.spec)));
  requests.clear();
  requests.shrink_to_fit();

  uint64_t next_report = progress_every;
  for (;;) {
    result.messages += sched.run();
    if (options.progress && result.messages >= next_report) {
      next_report = result.messages + progress_every;
      options.progress(seconds_since(ctx, clock.now()), result.metrics.scheduler.requests_completed,
                       result.requests_total);
    }
    if (!sched.trigger_timeout())
      break;
  }
  result.simulated_seconds = seconds_since(ctx, clock.now());
  if (options.progress)
    options.progress(result.simulated_seconds, result.metrics.scheduler.requests_completed, result.requests_total);

  auto link = [](const link_counters& c, double limit) { return link_report{c.bytes, c.operations, c.busy_seconds, limit}; };
  result.h2d = link(backend.copies().h2d_counters(), cfg.hardware.pcie.h2d.gbps);
  result.d2h = link(backend.copies().d2h_counters(), cfg.hardware.pcie.d2h.gbps);
  if (auto* pages = backend.pages()) {
    result.nvme_read = link(pages->read_counters(), cfg.hardware.nvme.read_gbps);
    result.nvme_write = link(pages->write_counters(), cfg.hardware.nvme.write_gbps);
  }

  for (auto h : {caf::actor_cast<caf::actor>(graph.scheduler), caf::actor_cast<caf::actor>(graph.blocks),
                 caf::actor_cast<caf::actor>(graph.transfers), caf::actor_cast<caf::actor>(graph.compression)})
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  sched.run();
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return result;
}

} // namespace kvtier::sim
