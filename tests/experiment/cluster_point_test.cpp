// A sweep point whose config has a [cluster] table runs the cluster
// simulation (as `kvtier sim` does) and its summary is the cluster's report;
// a cache-only sweep refuses it by name.

#include "experiment/point_run.hpp"
#include "experiment/results.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "sim/cluster_report.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/configured_run.hpp"
#include "sim/simulation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

namespace kvtier::experiment {
namespace {

// Two replicas behind the cache-aware router with a remote tier, over a
// small seeded synthetic workload of 40 requests.
constexpr const char* two_replicas = R"([model]
preset = "llama-3-8b"
[tiers.dram]
capacity = "16GB"
[tiers.nvme]
capacity = "64GB"
[sim]
trace_format = "synthetic"
[sim.synthetic]
requests = 40
rate_per_s = 4.0
shared_prefix_tokens = 1024
prefix_groups = 2
turns_per_session = 3
think_time_s = 2.0
seed = 5
input = { dist = "lognormal", mean = 900.0, sigma = 0.5 }
output = 32
[cluster]
replicas = 2
router = "cache_aware"
remote_capacity = "1TB"
)";

config two_replica_config() {
  auto cfg = parse_config(two_replicas, "two-replicas.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  return *cfg;
}

TEST(cluster_point, runs_the_cluster_and_keeps_its_report) {
  auto cfg = two_replica_config();
  auto point = run_point(cfg, run_mode::timed);
  ASSERT_TRUE(point) << describe(point.error());
  const auto& j = *point;
  EXPECT_EQ(j["replicas"], 2);
  ASSERT_EQ(j["per_replica"].size(), 2u);
  EXPECT_EQ(j["requests_completed"], 40);
  EXPECT_EQ(j["requests_rejected"], 0);
  EXPECT_EQ(j["per_replica"][0]["routed"].get<uint64_t>() + j["per_replica"][1]["routed"].get<uint64_t>(), 40u);
  // The summary is the cluster's report of the same run, plus its distributions.
  auto trace = sim::read_configured_trace(cfg);
  ASSERT_TRUE(trace);
  auto direct = sim::run_cluster(cfg, sim::requests_from(std::move(*trace)));
  auto report = sim::cluster_json(cfg, direct, {cfg.source, "synthetic(seed=5)"});
  EXPECT_EQ(j["ttft_ms"], report["ttft_ms"]);
  EXPECT_EQ(j["prefix_hits_by_tier"], report["prefix_hits_by_tier"]);
  EXPECT_EQ(j["remote_tier"]["stored_blocks"], report["remote_tier"]["stored_blocks"]);
  ASSERT_EQ(j["ttft_quantiles_ms"].size(), 51u); // every 2nd percentile, 0 to 100
  // The 100th percentile is the slowest first token, in ms to the microsecond.
  EXPECT_NEAR(j["ttft_quantiles_ms"].back().get<double>(),
              *std::max_element(direct.ttft_s.begin(), direct.ttft_s.end()) * 1e3, 5e-4);
}

TEST(cluster_point, adds_the_cluster_columns_to_the_csv) {
  auto cfg = two_replica_config();
  auto point = run_point(cfg, run_mode::timed);
  ASSERT_TRUE(point) << describe(point.error());
  experiment_spec spec;
  sweep_point p;
  p.label = "two replicas";
  auto csv = results_csv(spec, {record_of(p, *point)});
  auto header = csv.substr(0, csv.find('\n'));
  EXPECT_NE(header.find(",hit_remote,generated_tokens_per_s,remote_read_gbps,network_gbps"), std::string::npos)
      << header;
  EXPECT_NE(csv.find(",ok,40,"), std::string::npos) << csv; // completed

  // A single-node sweep keeps its columns as they were.
  auto single = cfg;
  single.cluster = {};
  auto one = run_point(single, run_mode::timed);
  ASSERT_TRUE(one) << describe(one.error());
  auto single_csv = results_csv(spec, {record_of(p, *one)});
  EXPECT_EQ(single_csv.find("hit_remote"), std::string::npos);
  EXPECT_EQ(metric_columns(run_mode::timed, true).size(), metric_columns(run_mode::timed).size() + 4);
}

TEST(cluster_point, a_cache_only_sweep_refuses_it_by_name) {
  auto point = run_point(two_replica_config(), run_mode::cache_only);
  ASSERT_FALSE(point);
  auto message = describe(point.error());
  EXPECT_NE(message.find("two-replicas.toml"), std::string::npos) << message;
  EXPECT_NE(message.find("[cluster]"), std::string::npos) << message;
  EXPECT_NE(message.find("mode = \"timed\""), std::string::npos) << message;
}

} // namespace
} // namespace kvtier::experiment
