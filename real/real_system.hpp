#pragma once
// kvtier on real hardware: the real backend (the copy engine of kernels/ —
// CUDA, or its CPU twin where no GPU is usable — the NVMe page store of io/,
// and a compute port) under the same actor graph as the simulation, on the
// wall clock. run/'s driver sets the graph up and stops it; run_real only
// waits, on the wall clock, until every request settled.

#include "actors/seam.hpp"
#include "run/driver.hpp"
#include "run/run_result.hpp"
#include "runtime/config.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvtier {

class tier_copy_engine;

struct real_backend_options {
  std::string device = "auto";     // auto | cuda | cpu (the copy engine's choice)
  double compute_time_scale = 1.0; // the stand-in compute port's step time multiplier; 0 = instant
  /// Replaces the stand-in compute port (a host application's model). Not owned.
  compute_port* compute = nullptr;
};

class real_backend final : public backend {
public:
  /// Allocates the HBM and DRAM pools and opens the NVMe slot file for the
  /// config's capacities. Errors name what could not be had and why.
  static caf::expected<std::unique_ptr<real_backend>> open(const config& cfg, const real_backend_options& options);
  ~real_backend() override;

  std::string name() const override;
  copy_engine& copies() override;
  page_store* pages() override;
  compute_port& compute() override;
  /// The copy engine, for byte-level access to the pools (tests, tools).
  tier_copy_engine& copy_engine_impl();

private:
  real_backend();
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// A request of a real run: arrival in wall-clock seconds from the run's
/// start, before real_run_options::arrival_time_scale.
using real_run_request = timed_request;

struct real_run_options {
  real_backend_options backend;
  double arrival_time_scale = 1.0;                          // multiplies arrival times
  std::function<void(double, uint64_t, uint64_t)> progress; // (seconds, settled, total), every progress_every
  double progress_every_s = 1.0;
  bool record_steps = false; // keep a time series of the steps (run_result's metrics.steps)
};

/// Runs the requests through the actor graph over a real backend until every
/// one completed or was rejected. Blocks the calling thread.
caf::expected<run_result> run_real(const config& cfg, std::vector<real_run_request> requests,
                                   const real_run_options& options = {});

} // namespace kvtier
