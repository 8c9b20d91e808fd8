// A cluster end to end on hand-made requests: where each request went, the
// bytes a prefill/decode handoff moves, the remote tier serving what a
// replica evicted, and reruns that agree byte for byte.

#include "sim/cluster_report.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/simulation.hpp"
#include "sim/trace.hpp"

#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <fmt/format.h>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

constexpr uint64_t block_bytes = 2 * 32 * 8 * 128 * 2 * 16; // Llama-3-8B, bf16, 16 tokens: 2 MiB

config config_of(const std::string& text) {
  auto cfg = parse_config(text, "test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  return *cfg;
}

// A request whose prompt is `blocks` whole blocks with ids first.. (one id
// per 16-token block), arriving at `at` seconds.
timed_request request(uint64_t id, double at, uint64_t first, uint32_t blocks, uint32_t output) {
  timed_request r;
  r.arrival_s = at;
  r.spec.id = id;
  r.spec.prompt_tokens = uint64_t{blocks} * 16;
  r.spec.output_tokens = output;
  r.spec.external_block_tokens = 16;
  for (uint32_t i = 0; i < blocks; ++i)
    r.spec.external_ids.push_back(first + i);
  return r;
}

uint64_t prefill_tokens(const cluster_result& r) {
  uint64_t n = 0;
  for (const auto& rep : r.replicas)
    n += rep.metrics.scheduler.prefill_tokens;
  return n;
}

nlohmann::json deterministic_part(nlohmann::json j) {
  for (auto key : {"wall_seconds", "speedup", "threads"})
    j.erase(key);
  return j;
}

} // namespace

TEST(cluster_simulation, round_robin_places_requests_in_turn_and_all_complete) {
  auto cfg = config_of("[cluster]\nreplicas = 3\nrouter = \"round_robin\"\n");
  std::vector<timed_request> reqs;
  for (uint64_t i = 0; i < 5; ++i)
    reqs.push_back(request(i + 1, 0.001 * static_cast<double>(i), 1000 * (i + 1), 4, 3));
  auto r = run_cluster(cfg, std::move(reqs));
  EXPECT_EQ(r.placement, (std::vector<uint32_t>{0, 1, 2, 0, 1}));
  EXPECT_EQ(r.routed, (std::vector<uint64_t>{2, 2, 1}));
  EXPECT_EQ(r.requests_completed, 5u);
  EXPECT_EQ(prefill_tokens(r), 5u * 64);
  EXPECT_EQ(r.ttft_s.size(), 5u);
  EXPECT_EQ(r.tpot_s.size(), 5u);
}

TEST(cluster_simulation, least_loaded_sends_to_the_replica_with_fewest_outstanding) {
  auto cfg = config_of("[cluster]\nreplicas = 2\nrouter = \"least_loaded\"\n");
  // Two long requests at once, then a short one while both run, then one
  // after everything settled.
  std::vector<timed_request> reqs{request(1, 0, 100, 8, 400), request(2, 0, 200, 8, 50), request(3, 0.0001, 300, 2, 2),
                                  request(4, 100, 400, 2, 2)};
  auto r = run_cluster(cfg, std::move(reqs));
  // 1 -> 0 (tie), 2 -> 1 (0 has one), 3 -> 0 (tie at one each), 4 -> 0 (all settled).
  EXPECT_EQ(r.placement, (std::vector<uint32_t>{0, 1, 0, 0}));
  EXPECT_EQ(r.requests_completed, 4u);
}

TEST(cluster_simulation, cache_aware_keeps_a_shared_prefix_on_one_replica) {
  auto cfg = config_of("[cluster]\nreplicas = 3\nrouter = \"cache_aware\"\nload_slack = 8\n");
  // Three prefixes at once (the load spreads them), then twice more each,
  // one round a second, when every replica is idle: the prefix decides.
  std::vector<timed_request> reqs;
  uint64_t id = 1;
  for (int round = 0; round < 3; ++round)
    for (uint64_t p = 0; p < 3; ++p) {
      auto r = request(id, round + 1e-6 * static_cast<double>(p), 1000 * (p + 1), 32, 2);
      r.spec.external_ids.push_back(50'000 + id); // a block of its own after the shared prefix
      r.spec.prompt_tokens += 16;
      reqs.push_back(std::move(r));
      ++id;
    }
  auto r = run_cluster(cfg, std::move(reqs));
  EXPECT_EQ(r.placement, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2}));
  // Each prefix was computed once: 3 x 33 blocks, then one block each.
  EXPECT_EQ(prefill_tokens(r), 3u * 33 * 16 + 6u * 16);
}

TEST(cluster_simulation, prefill_decode_handoff_moves_each_prompt_once_and_decode_recomputes_nothing) {
  auto cfg = config_of("[cluster]\nreplicas = 3\nprefill = 1\ndecode = 2\n");
  std::vector<timed_request> reqs{request(1, 0, 100, 7, 5), request(2, 0.01, 200, 3, 4), request(3, 0.02, 300, 5, 1)};
  auto r = run_cluster(cfg, std::move(reqs));
  EXPECT_EQ(r.requests_completed, 3u);
  EXPECT_EQ(r.placement, (std::vector<uint32_t>{0, 0, 0}));
  // A single-token request ends at its prefill: no handoff.
  EXPECT_EQ(r.handoff_blocks, 7u + 3u);
  EXPECT_EQ(r.handoff_bytes, (7u + 3u) * block_bytes);
  EXPECT_EQ(r.nic_out[0].bytes, (7u + 3u) * block_bytes);
  EXPECT_EQ(r.nic_in[1].bytes + r.nic_in[2].bytes, (7u + 3u) * block_bytes);
  EXPECT_EQ(r.replicas[0].metrics.scheduler.prefill_tokens, (7u + 3u + 5u) * 16);
  for (size_t d : {1, 2}) {
    EXPECT_EQ(r.replicas[d].metrics.scheduler.prefill_tokens, 0u) << "decode replica " << d;
    EXPECT_EQ(r.replicas[d].metrics.scheduler.recomputed_tokens, 0u);
  }
  EXPECT_EQ(r.replicas[1].metrics.scheduler.supplied_tokens + r.replicas[2].metrics.scheduler.supplied_tokens,
            (7u + 3u) * 16);
  // Decode tokens: 4 and 3 after the first token each.
  EXPECT_EQ(r.replicas[1].metrics.scheduler.decode_tokens + r.replicas[2].metrics.scheduler.decode_tokens, 4u + 3u);
  EXPECT_EQ(r.tpot_s.size(), 2u);
}

TEST(cluster_simulation, remote_tier_serves_a_prefix_the_replica_evicted) {
  // 40 HBM blocks and no lower tier: a 39-block prompt evicts every block of
  // the first one, so its second coming finds it only in the remote tier.
  auto cfg =
      config_of(fmt::format("[tiers.hbm]\ncapacity = {}\n[tiers.dram]\nenabled = false\n[tiers.nvme]\nenabled = false\n"
                            "[cluster]\nremote_capacity = \"1GB\"\n",
                            40 * block_bytes));
  ASSERT_EQ(cfg.hbm_blocks(), 40u);
  std::vector<timed_request> reqs{request(1, 0, 100, 20, 4), request(2, 10, 500, 39, 4), request(3, 20, 100, 20, 4)};
  auto r = run_cluster(cfg, std::move(reqs));
  ASSERT_EQ(r.requests_completed, 3u);
  EXPECT_EQ(r.remote_capacity_blocks, 1'000'000'000u / block_bytes);
  EXPECT_EQ(r.remote_stored_blocks, 20u + 39u);
  EXPECT_EQ(r.remote_fetched_blocks, 20u);
  EXPECT_EQ(r.remote_read.bytes, 20u * block_bytes);
  const auto& m = r.replicas[0].metrics;
  EXPECT_EQ(m.blocks.tiers[0].prefix_hit_blocks, 0u);
  EXPECT_EQ(m.scheduler.supplied_blocks, 20u);
  EXPECT_EQ(m.scheduler.prefill_tokens, (20u + 39u) * 16);
  auto j = cluster_json(cfg, r, {"c", "t"});
  EXPECT_DOUBLE_EQ(j["prefix_hits_by_tier"]["remote"].get<double>(), 20.0 / 79.0);
  EXPECT_DOUBLE_EQ(j["prefix_hits_by_tier"]["miss"].get<double>(), 59.0 / 79.0);
}

// Reruns agree byte for byte, and so do runs on one thread and on several:
// replicas advance in lockstep between the router's decisions.
TEST(cluster_simulation, reruns_are_byte_identical_on_any_number_of_threads) {
  trace_read_options o;
  o.max_requests = 60;
  auto t = read_trace(default_trace_path(), trace_format::mooncake, o);
  ASSERT_TRUE(t) << describe(t.error());
  for (const char* pools : {"", "prefill = 2\ndecode = 2\n"}) {
    auto with_threads = [&](int threads) {
      return config_of(fmt::format("[cluster]\nreplicas = 4\nrouter = \"cache_aware\"\nremote_capacity = \"100GB\"\n{}"
                                   "threads = {}\n[sim]\ntime_scale = 1.0\n",
                                   pools, threads));
    };
    auto one = with_threads(1);
    auto three = with_threads(3);
    auto a = run_cluster(one, requests_from(trace(*t)));
    auto b = run_cluster(three, requests_from(trace(*t)));
    EXPECT_EQ(a.threads, 1u);
    EXPECT_EQ(b.threads, *pools ? 2u : 3u); // never more than the widest pool: 2 prefill, 2 decode
    EXPECT_EQ(a.requests_completed, 60u) << "pools: " << pools;
    const auto ja = deterministic_part(cluster_json(one, a, {"c", "t"})).dump();
    EXPECT_EQ(ja, deterministic_part(cluster_json(one, b, {"c", "t"})).dump()) << "pools: " << pools;
    EXPECT_EQ(a.placement, b.placement);
    EXPECT_EQ(a.decode_placement, b.decode_placement);
  }
}

TEST(cluster_config, pools_must_add_up_and_name_the_key) {
  auto half = parse_config("[cluster]\nreplicas = 3\nprefill = 2\n", "c.toml");
  ASSERT_FALSE(half);
  EXPECT_EQ(describe(half.error()),
            "c.toml:1:1: [cluster] decode: expected prefill and decode both 0 (no pools) or "
            "both at least 1, got prefill = 2, decode = 0");
  auto sum = parse_config("[cluster]\nreplicas = 3\nprefill = 2\ndecode = 2\n", "c.toml");
  ASSERT_FALSE(sum);
  EXPECT_EQ(describe(sum.error()),
            "c.toml:2:12: [cluster] replicas: expected prefill + decode = replicas, got 2 + 2 and replicas = 3");
  auto router = parse_config("[cluster]\nrouter = \"random\"\n", "c.toml");
  ASSERT_FALSE(router);
  EXPECT_NE(describe(router.error()).find("round_robin, least_loaded, cache_aware"), std::string::npos)
      << describe(router.error());
  auto real = parse_config("backend = \"real\"\n[tiers.hbm]\ncapacity = \"1GB\"\n[tiers.dram]\nenabled = false\n"
                           "[tiers.nvme]\nenabled = false\n[cluster]\nreplicas = 2\n",
                           "c.toml");
  ASSERT_FALSE(real);
  EXPECT_NE(describe(real.error()).find("a cluster is simulated only"), std::string::npos) << describe(real.error());
}

TEST(cluster_config, the_hardware_profile_has_a_nic) {
  auto cfg = config_of("");
  EXPECT_EQ(cfg.hardware.nic.gbps, 50);
  EXPECT_EQ(cfg.hardware.nic.latency_us, 10);
  EXPECT_FALSE(cfg.cluster.active());
}
