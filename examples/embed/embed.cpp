// kvtier in-process: the scheduler, block manager and transfer engine as CAF
// actors on the simulated backend, driven by a small synthetic workload. The
// application owns the process; kvtier is a library call away.

#include "run/report.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/simulation.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>

int main() {
  auto cfg = kvtier::parse_config(R"(
[model]
preset = "llama-3-8b"
[tiers.dram]
capacity = "16GB"
)",
                                  "embed.toml");
  if (!cfg) {
    fmt::print(stderr, "embed: {}\n", kvtier::describe(cfg.error()));
    return 1;
  }
  kvtier::sim::synthetic_spec spec;
  spec.requests = 50;
  spec.rate_per_s = 5;
  spec.shared_prefix_tokens = 512;
  spec.turns_per_session = 2;
  auto trace = kvtier::sim::generate_synthetic(spec);
  if (!trace) {
    fmt::print(stderr, "embed: {}\n", kvtier::describe(trace.error()));
    return 1;
  }
  const auto result = kvtier::sim::run_simulation(*cfg, kvtier::sim::requests_from(std::move(*trace)));
  fmt::print("embed: {} of {} requests completed\n", result.metrics.scheduler.requests_completed, spec.requests);
  return result.metrics.scheduler.requests_completed == spec.requests ? 0 : 1;
}
