#pragma once
// The simulated backend: the seam of runtime/backend.hpp with modeled timing.
// Every submission computes its finish time from the link, NVMe and compute
// models and schedules its completion message on the actor system's clock,
// which the simulation runs as a virtual clock. No bytes move.

#include "run/run_result.hpp"
#include "actors/seam.hpp"
#include "runtime/config.hpp"
#include "runtime/cost_model.hpp"
#include "sim/link_model.hpp"

#include <caf/actor_system.hpp>

#include <memory>
#include <vector>

namespace kvtier::sim {

class sim_backend final : public backend {
public:
  sim_backend(caf::actor_system& system, const config& cfg, caf::actor_clock::time_point epoch);
  ~sim_backend() override;

  std::string name() const override { return "simulated"; }
  copy_engine& copies() override;
  page_store* pages() override;
  compute_port& compute() override;

  const pcie_model& pcie() const;
  const nvme_model& nvme() const;
  /// Records every submission's interval into `events` from now on (nullptr stops).
  void record_timeline(std::vector<timeline_event>* events);

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace kvtier::sim
