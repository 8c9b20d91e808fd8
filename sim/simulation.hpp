#pragma once
// Trace-driven simulation: the real actor graph (actors/) on the simulated
// backend, under CAF's deterministic scheduler with a virtual clock.
//
// The loop: run every ready message; when none is left, jump the clock to the
// next scheduled completion or arrival; repeat until nothing is scheduled.
// The same config and requests give byte-identical results.

#include "run/driver.hpp"
#include "run/run_result.hpp"
#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "sim/sim_backend.hpp"
#include "sim/trace.hpp"
#include "sim/virtual_clock.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kvtier::sim {

/// A simulated request: arrival in virtual seconds from the run's start.
using sim_request = timed_request;

struct sim_options {
  bool record_steps = false;
  bool record_timeline = false;
  /// Called now and then with (simulated seconds, completed, total); may be empty.
  std::function<void(double, uint64_t, uint64_t)> progress;
};

/// The requests of a trace as the scheduler receives them (ids from 1; at
/// least one output token each). Consumes the trace's block id lists.
std::vector<sim_request> requests_from(trace&& t);

/// Runs the requests to the end. Arrivals and every modeled duration reach the
/// clock through virtual_duration(): a time past the clock's reach saturates
/// instead of wrapping, and the run reports it through clock_saturated().
run_result run_simulation(const config& cfg, std::vector<sim_request> requests, const sim_options& options = {});

/// True when the run's clock reached max_virtual_seconds: something was
/// scheduled past what the clock can hold, and the run's figures are void.
bool clock_saturated(const run_result& result);

} // namespace kvtier::sim
