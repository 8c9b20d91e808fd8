// bench/sim_speed: how fast the simulator replays traffic, and what the actor
// graph costs per step.
//
//  1. The full bundled Mooncake conversation trace (59 minutes of traffic) in
//     timed mode on the default config: simulated seconds per wall second
//     (baseline: real time, 1x; a published peer reports ~67x) and messages/s.
//  2. Scheduler + actor overhead per step at batch 256: 256 sequences decode
//     together through the actor graph (modeled compute costs no wall time),
//     against the same scheduler and block manager logic driven in a plain
//     loop without actors (the baseline).
// Prints a table and JSON (also to --json FILE).

#include "actors/block_manager_state.hpp"
#include "actors/scheduler_state.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "sim/simulation.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

constexpr uint32_t batch = 256;
constexpr uint32_t decode_tokens = 2000;

std::vector<sim_request> decode_batch() {
  std::vector<sim_request> out;
  for (uint32_t i = 0; i < batch; ++i) {
    request_spec s;
    s.id = i + 1;
    s.prompt_tokens = 16;
    s.output_tokens = decode_tokens;
    out.push_back({0.0, std::move(s)});
  }
  return out;
}

// The baseline: the same logic objects, answering each other directly.
double plain_loop_seconds_per_step(const config& cfg, uint64_t& steps) {
  cost_model costs(cfg);
  scheduler_metrics sm;
  block_metrics bmm;
  auto so = scheduler_options_from(cfg);
  scheduler_state sched(so, costs, &sm, nullptr);
  auto bo = block_manager_options_from(cfg);
  block_manager_state bm(bo, &bmm);
  for (auto& r : decode_batch())
    sched.on_arrival(std::move(r.spec), 0.0);
  auto start = std::chrono::steady_clock::now();
  double now = 0;
  while (auto ops = sched.build_plan()) {
    step_grant g;
    g.step = ops->step;
    for (auto& op : ops->ops) {
      op_result r;
      r.seq = op.seq;
      switch (op.what) {
        case sequence_op::kind::admit: {
          auto a = bm.admit(op.seq, std::move(op.chain), op.prompt_tokens);
          r.status = a.status;
          if (a.status == admit_status::ready && !bm.grow(op.seq, op.tokens))
            r.status = admit_status::no_room;
          break;
        }
        case sequence_op::kind::grow:
          r.status = bm.grow(op.seq, op.tokens) ? admit_status::ready : admit_status::no_room;
          break;
        case sequence_op::kind::release:
          bm.release(op.seq);
          break;
        default:
          break;
      }
      g.results.push_back(r);
    }
    g.hbm_free = bm.free_blocks(tier::hbm);
    auto plan = sched.on_grant(g, now);
    if (!plan.sequences.empty()) {
      now += 0.01;
      sched.on_step_done(now, 0.01);
    }
  }
  steps = sm.steps;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
      static_cast<double>(sm.steps);
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0)
      json_path = argv[i + 1];
  auto cfg = parse_config(*embedded_file("default.toml"), "default.toml");
  if (!cfg) {
    fmt::print(stderr, "{}\n", describe(cfg.error()));
    return 1;
  }

  // -- 1. the whole trace ---------------------------------------------------------
  trace_read_options ro;
  ro.time_scale = cfg->sim.time_scale;
  auto t = read_trace(default_trace_path(), trace_format::mooncake, ro);
  if (!t) {
    fmt::print(stderr, "{}\n", describe(t.error()));
    return 1;
  }
  auto source = t->source;
  auto traffic_s = t->stats.duration_s;
  auto full = run_simulation(*cfg, requests_from(std::move(*t)));
  double speed = full.simulated_seconds / full.wall_seconds;

  // -- 2. per-step overhead at batch 256 ---------------------------------------------
  auto small = *cfg;
  small.tiers.nvme.enabled = false;
  auto actors = run_simulation(small, decode_batch());
  double actor_step = actors.wall_seconds / static_cast<double>(actors.metrics.scheduler.steps);
  uint64_t plain_steps = 0;
  double plain_step = plain_loop_seconds_per_step(small, plain_steps);

  fmt::print("{:<44} {:>14} {:>14} {:>10} {:>10}\n", "metric", "kvtier", "baseline", "ratio", "goal");
  fmt::print("{:<44} {:>14.0f} {:>14} {:>9.0f}x {:>10}\n", "simulated s per wall s (Mooncake, full trace)", speed,
             "1 (real time)", speed, ">= 2000");
  fmt::print("{:<44} {:>14.2f} {:>14} {:>10} {:>10}\n", "  wall seconds for the trace", full.wall_seconds, "", "", "");
  fmt::print("{:<44} {:>14.2f} {:>14} {:>10} {:>10}\n", "  CAF messages per second (M)",
             full.messages / full.wall_seconds / 1e6, "", "", "");
  fmt::print("{:<44} {:>14.1f} {:>14.1f} {:>9.2f}x {:>10}\n", "us per step at batch 256 (actors vs plain)",
             actor_step * 1e6, plain_step * 1e6, actor_step / plain_step, "<= 100");
  nlohmann::json j{
      {"benchmark", "sim_speed"},
      {"trace", source},
      {"trace_traffic_seconds", traffic_s},
      {"time_scale", cfg->sim.time_scale},
      {"requests", full.requests_total},
      {"requests_completed", full.metrics.scheduler.requests_completed},
      {"simulated_seconds", full.simulated_seconds},
      {"wall_seconds", full.wall_seconds},
      {"simulated_per_wall", speed},
      {"messages", full.messages},
      {"messages_per_second", full.messages / full.wall_seconds},
      {"steps", full.metrics.scheduler.steps},
      {"batch256_steps", actors.metrics.scheduler.steps},
      {"batch256_us_per_step_actors", actor_step * 1e6},
      {"batch256_us_per_step_plain", plain_step * 1e6},
      {"actor_overhead_ratio", actor_step / plain_step},
      {"goals", {{"simulated_per_wall", 2000}, {"us_per_step_batch256", 100}}},
  };
  fmt::print("{}\n", j.dump());
  if (!json_path.empty())
    std::ofstream(json_path) << j.dump(2) << "\n";
  return 0;
}
