#pragma once
// What `kvtier sim` and `kvtier run` share: their command-line options, the
// config a run uses (the file, or the built-in default, with the command
// line's overrides applied) and the trace it replays. Both live in
// sim_command.cpp; run_command.cpp uses them.

#include "runtime/config.hpp"
#include "runtime/config_overrides.hpp"
#include "sim/trace.hpp"

#include <CLI/CLI.hpp>
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
  std::string max_requests;
  std::string time_scale;
  config_overrides given; // filled from the flags the user gave, before run
  bool cache_only = false;
  bool oracle = false;
  bool no_bound = false;    // timed runs: skip the Belady bound and the gap closed
  bool against_lru = false; // timed runs: also run the LRU twin of the config, for the TTFT change
  bool unbounded = false;
  bool skip_bad = false;
  bool quiet = false;
  // kvtier run
  std::string device = "auto";
  std::string compute_scale = "1";
  std::string tokens_out; // what the model generated, per request, as JSON
};

/// The config flags the user gave (CLI11 counts them), as overrides; they go
/// through the same validation as the file's values.
config_overrides overrides_of(const sim_cli_options& o, const CLI::App& app);

/// The config of a run: `o.config_path` (or the built-in default) with the
/// command line's overrides.
caf::expected<config> load(const sim_cli_options& o);

/// The trace `cfg` names (the bundled one when it names none), read with
/// [sim]'s max_requests, time_scale and skip_bad.
caf::expected<sim::trace> load_trace(const config& cfg);

} // namespace kvtier::cli
