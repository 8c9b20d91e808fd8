// The simulator's clock: conversions saturate instead of wrapping, and a run
// that reached the cap says so.

#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "sim/simulation.hpp"
#include "sim/virtual_clock.hpp"

#include <gtest/gtest.h>

#include <limits>

using namespace kvtier;
using namespace kvtier::sim;

TEST(virtual_clock, conversions_saturate) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(virtual_ns(1.5), 1'500'000'000);
  EXPECT_EQ(virtual_ns(0), 0);
  EXPECT_EQ(virtual_ns(-3), 0);
  EXPECT_EQ(virtual_ns(-inf), 0);
  EXPECT_EQ(virtual_ns(1.08e10), max_virtual_ns); // 3 hours at time scale 1e6
  EXPECT_EQ(virtual_ns(inf), max_virtual_ns);
  EXPECT_EQ(virtual_ns(std::numeric_limits<double>::quiet_NaN()), max_virtual_ns);
  EXPECT_EQ(virtual_ns_nearest(std::numeric_limits<double>::quiet_NaN()), max_virtual_ns);
  EXPECT_EQ(virtual_ns_nearest(2.0000000006), 2'000'000'001);
  EXPECT_EQ(virtual_ns(2.0000000006), 2'000'000'000); // truncates as duration_cast does
  EXPECT_EQ(virtual_duration(1e300).count(), max_virtual_ns);
}

TEST(virtual_clock, a_run_past_the_clock_is_flagged) {
  auto cfg = parse_config("", "test.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  auto request = [](uint64_t id, double arrival_s) {
    sim_request r;
    r.arrival_s = arrival_s;
    r.spec.id = id;
    r.spec.prompt_tokens = 64;
    r.spec.output_tokens = 2;
    return r;
  };
  auto fine = run_simulation(*cfg, {request(1, 0), request(2, 10)});
  EXPECT_FALSE(clock_saturated(fine));
  EXPECT_EQ(fine.metrics.scheduler.requests_completed, 2u);
  // A library caller can hand over any double: an arrival at 1e300 s lands on the cap, not on a wrapped time.
  auto past = run_simulation(*cfg, {request(1, 0), request(2, 1e300)});
  EXPECT_TRUE(clock_saturated(past));
  EXPECT_EQ(past.simulated_seconds, max_virtual_seconds);
}
