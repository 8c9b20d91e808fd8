#pragma once
// One run of kvtier's actor graph over a backend, whichever clock drives it:
// what the simulated and the real run share. The driver builds the graph's
// context (config, cost model, metrics of `result`, epoch = the clock's now),
// spawns the graph over the backend, schedules every request's arrival on the
// actor clock, and at the end reads the backend's link counters into the
// result and stops the graph. How time advances between arrival and stop is
// the backend's business: sim/ runs CAF's test scheduler and jumps its
// virtual clock; real/ waits on the wall clock until every request settled.
//
//   run_driver driver(system, cfg, result);
//   sim_backend io(system, driver.context().cfg, driver.epoch());   // or a real backend
//   driver.start(io);
//   driver.schedule_arrivals(std::move(requests));
//   ... let time pass ...
//   driver.collect_links();
//   driver.stop();   // then let the scheduler deliver the exits
//
// Invariants: start() once, before schedule_arrivals(); the backend outlives
// the driver's graph (stop() and the exits delivered). The driver never asks
// which backend it runs.

#include "actors/graph.hpp"
#include "actors/messages.hpp"
#include "runtime/config.hpp"
#include "run/run_result.hpp"

#include <caf/actor_system.hpp>

#include <vector>

namespace kvtier {

/// A request as a run receives it: its arrival, in seconds from the run's start.
struct timed_request {
  double arrival_s = 0;
  request_spec spec;
};

class run_driver {
public:
  /// Prepares the graph's context; `result` receives the actors' metrics and
  /// must outlive the run.
  run_driver(caf::actor_system& system, const config& cfg, run_result& result);

  graph_context& context() { return context_; }
  caf::actor_clock::time_point epoch() const { return context_.epoch; }
  const actor_graph& graph() const { return graph_; }

  /// Spawns the actor graph over `io` (not owned).
  void start(backend& io);
  /// Schedules each request at epoch + arrival_s · time_scale on the actor clock.
  void schedule_arrivals(std::vector<timed_request> requests, double time_scale = 1.0);
  /// The backend's link counters, each against its limit in the hardware profile.
  void collect_links();
  /// Asks every actor of the graph to exit.
  void stop();

private:
  caf::actor_system& system_;
  run_result& result_;
  graph_context context_;
  actor_graph graph_;
};

} // namespace kvtier
