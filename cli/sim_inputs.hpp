#pragma once
// What `kvtier sim` and `kvtier run` share: their command-line options, the
// config a run uses (the file, or the built-in default, with the command
// line's overrides applied) and the trace it replays. Both live in
// sim_command.cpp; run_command.cpp uses them.

#include "runtime/config.hpp"
#include "sim/trace.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kvtier::cli {

struct sim_cli_options {
  std::string config_path;
  std::string trace_path;
  std::string format;
  std::string json_out;
  std::string steps_csv;
  std::string chrome_trace;
  std::string hbm, dram, nvme;
  uint64_t max_requests = 0;
  double time_scale = 0;
  bool cache_only = false;
  bool oracle = false;
  bool unbounded = false;
  bool skip_bad = false;
  bool quiet = false;
  // kvtier run
  std::string device = "auto";
  double compute_scale = 1.0;
};

/// The config of a run: `o.config_path` (or the built-in default) with the
/// command line's overrides.
caf::expected<config> load(const sim_cli_options& o);

/// The trace `cfg` names (the bundled one when it names none), read with
/// [sim]'s max_requests, time_scale and skip_bad.
caf::expected<sim::trace> load_trace(const config& cfg, const sim_cli_options& o);

} // namespace kvtier::cli
