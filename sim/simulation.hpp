#pragma once
// Trace-driven simulation: the real actor graph (actors/) on the simulated
// backend, under CAF's deterministic scheduler with a virtual clock.
//
// The loop: run every ready message; when none is left, jump the clock to the
// next scheduled completion or arrival; repeat until nothing is scheduled.
// The same config and requests give byte-identical results.

#include "actors/messages.hpp"
#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "sim/sim_backend.hpp"
#include "sim/trace.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvtier::sim {

struct sim_request {
  double arrival_s = 0;
  request_spec spec;
};

struct sim_options {
  bool record_steps = false;
  bool record_timeline = false;
  /// Called now and then with (simulated seconds, completed, total); may be empty.
  std::function<void(double, uint64_t, uint64_t)> progress;
};

struct link_report {
  uint64_t bytes = 0;
  uint64_t operations = 0;
  double busy_seconds = 0;
  double limit_gbps = 0;
};

struct sim_result {
  run_metrics metrics;
  uint64_t requests_total = 0;
  double simulated_seconds = 0;
  double wall_seconds = 0;
  uint64_t messages = 0;
  link_report h2d, d2h, nvme_read, nvme_write;
  std::vector<timeline_event> timeline; // when record_timeline
};

/// The requests of a trace as the scheduler receives them (ids from 1; at
/// least one output token each). Consumes the trace's block id lists.
std::vector<sim_request> requests_from(trace&& t);

sim_result run_simulation(const config& cfg, std::vector<sim_request> requests, const sim_options& options = {});

} // namespace kvtier::sim
