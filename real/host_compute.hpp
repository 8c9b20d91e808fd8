#pragma once
// A compute port for real runs without a model: it takes each step for as
// long as the roofline (cost_model) says the model would, on the wall clock,
// on its own thread, then reports completion. It stands in for the dense
// model so the rest of the system (real copies, real NVMe I/O, real time)
// runs as in production; a host application embedding kvtier plugs its own
// compute_port instead.
//
// Steps run one at a time in submission order; `time_scale` multiplies the
// modeled time (0 = as fast as possible).

#include "actors/seam.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/worker_queue.hpp"

namespace kvtier {

class host_compute_port final : public compute_port {
public:
  host_compute_port(const config& cfg, double time_scale);
  ~host_compute_port() override;

  void execute(step_plan plan, caf::actor notify, uint64_t tag) override;

private:
  struct job {
    double seconds;
    caf::actor notify;
    uint64_t tag;
  };
  void run(const job& next);

  cost_model costs_;
  double time_scale_;
  worker_queue<job> steps_; // last: its thread starts once the members above exist; destruction drains it
};

} // namespace kvtier
