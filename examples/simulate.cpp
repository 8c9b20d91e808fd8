// A simulation driven from code: a synthetic multi-turn workload through the
// full actor graph on the simulated backend, with the report as JSON.

#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "run/report.hpp"
#include "sim/simulation.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>

using namespace kvtier;

int main() {
  auto cfg = parse_config(R"(
[model]
preset = "llama-3-8b"
[tiers.dram]
capacity = "64GB"
)",
                          "example.toml");
  if (!cfg) {
    fmt::print(stderr, "{}\n", describe(cfg.error()));
    return 1;
  }
  sim::synthetic_spec spec;
  spec.requests = 500;
  spec.rate_per_s = 5;
  spec.shared_prefix_tokens = 1024;
  spec.turns_per_session = 4;
  auto trace = sim::generate_synthetic(spec);
  if (!trace) {
    fmt::print(stderr, "{}\n", describe(trace.error()));
    return 1;
  }
  auto source = trace->source;
  auto result = sim::run_simulation(*cfg, sim::requests_from(std::move(*trace)));
  auto report = report_json(*cfg, result, {"example.toml", source});
  fmt::print("{}", report_table(report));
  return 0;
}
