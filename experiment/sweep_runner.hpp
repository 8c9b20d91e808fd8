#pragma once
// Runs an experiment's points over the machine's cores: one child process
// per point (fork), at most `jobs` at once, so every run has its own actor
// system and shares no state with another. A child writes its point's record
// atomically (experiment/results.hpp) and exits; the parent only counts,
// shows progress and, when every point is finished, writes results.json,
// results.csv and report.html.
//
// Resumable: points whose record exists are not rerun. An interrupt (SIGINT,
// SIGTERM) stops the children and leaves every finished record in place;
// running the same command again finishes the rest. Records are per point,
// so the results of a resumed sweep equal those of one uninterrupted run.

#include "experiment/experiment_spec.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace kvtier::experiment {

struct sweep_options {
  std::string out_dir;
  unsigned jobs = 0;         // 0: one per core
  bool progress_bar = false; // redraw one line (a terminal); else a line per finished point
  std::FILE* progress = stderr;
  uint32_t stop_after = 0; // > 0: stop as if interrupted once this many points finished in this call
};

struct sweep_outcome {
  size_t points = 0;
  size_t reused = 0; // finished before this call
  size_t ran = 0;    // finished in this call
  size_t failed = 0; // finished with an error (recorded: the error is the point's result)
  bool interrupted = false;
  double wall_seconds = 0;
};

/// Errors: the output folder cannot be made or written, or a child died
/// without a record (a crash).
caf::expected<sweep_outcome> run_sweep(const experiment_spec& spec, const sweep_options& options);

/// Reads every point's record and writes results.json, results.csv and
/// report.html; errc::invalid_argument if some point has no record yet.
caf::error write_results(const experiment_spec& spec, const std::string& out_dir);

} // namespace kvtier::experiment
