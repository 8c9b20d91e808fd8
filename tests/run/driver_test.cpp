// run_driver, as both backends use it: each arrival lands on the actor clock
// at epoch + arrival · time_scale, the graph serves them, and the links'
// figures come from the backend's counters against the profile's limits.

#include "run/driver.hpp"
#include "runtime/error.hpp"
#include "sim/sim_backend.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <gtest/gtest.h>

using namespace kvtier;

namespace {

timed_request request(uint64_t id, double arrival_s) {
  timed_request r;
  r.arrival_s = arrival_s;
  r.spec.id = id;
  r.spec.prompt_tokens = 40;
  r.spec.output_tokens = 2;
  return r;
}

} // namespace

TEST(run_driver, arrivals_land_at_their_scaled_time_and_links_carry_the_profile_limits) {
  auto cfg = parse_config("", "t.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  caf::actor_system_config sys_cfg;
  sys_cfg.set("scheduler.policy", caf::atom("testing"));
  sys_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{sys_cfg};
  system.await_actors_before_shutdown(false);
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());

  run_result result;
  run_driver driver(system, *cfg, result);
  sim::sim_backend io(system, driver.context().cfg, driver.epoch());
  driver.start(io);
  sched.run();
  std::vector<timed_request> requests;
  requests.push_back(request(1, 0.5));
  requests.push_back(request(2, 1.5));
  driver.schedule_arrivals(std::move(requests), 2.0);

  std::vector<double> scheduled;
  for (const auto& entry : sched.clock().schedule())
    scheduled.push_back(seconds_since(driver.context(), entry.first));
  EXPECT_EQ(scheduled, (std::vector<double>{1.0, 3.0}));

  do
    sched.run();
  while (sched.trigger_timeout());
  EXPECT_EQ(result.metrics.scheduler.requests_arrived, 2u);
  EXPECT_EQ(result.metrics.scheduler.requests_completed, 2u);

  driver.collect_links();
  EXPECT_EQ(result.h2d.limit_gbps, cfg->hardware.pcie.h2d.gbps);
  EXPECT_EQ(result.d2h.limit_gbps, cfg->hardware.pcie.d2h.gbps);
  EXPECT_EQ(result.nvme_read.limit_gbps, cfg->hardware.nvme.read_gbps);
  EXPECT_EQ(result.nvme_write.limit_gbps, cfg->hardware.nvme.write_gbps);
  EXPECT_EQ(result.h2d.bytes, io.copies().h2d_counters().bytes);
  EXPECT_EQ(result.d2h.bytes, io.copies().d2h_counters().bytes);
  driver.stop();
  sched.run();
}
