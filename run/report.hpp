#pragma once
// What a run tells its user, simulated or real: a summary table for the
// terminal and the same figures as JSON, plus the optional per-step CSV and
// Chrome trace. The JSON's field order and values are a stable interface:
// the default simulation's report is compared byte for byte across changes.

#include "run/run_result.hpp"
#include "runtime/config.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace kvtier {

struct run_labels {
  std::string config; // config file (or "<built-in>/configs/default.toml")
  std::string trace;  // trace source
};

struct percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

/// Linear-interpolation percentiles (numpy's default); zeros for no samples.
percentiles percentiles_of(std::vector<double> samples);

nlohmann::json report_json(const config& cfg, const run_result& result, const run_labels& labels);
std::string report_table(const nlohmann::json& report);
std::string steps_csv(const run_result& result);
/// Chrome trace event format (chrome://tracing, Perfetto): one row per resource.
nlohmann::json chrome_trace(const run_result& result);

} // namespace kvtier
