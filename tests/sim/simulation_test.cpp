#include "sim/cache_only.hpp"
#include "sim/oracle_bound.hpp"
#include "run/report.hpp"
#include "sim/simulation.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/trace.hpp"

#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

std::vector<sim_request> requests_of(trace t) {
  return requests_from(std::move(t));
}

trace mooncake(uint64_t max_requests, double time_scale = 3.0) {
  trace_read_options o;
  o.max_requests = max_requests;
  o.time_scale = time_scale;
  auto t = read_trace(default_trace_path(), trace_format::mooncake, o);
  EXPECT_TRUE(t) << describe(t.error());
  return *t;
}

config config_of(const std::string& text) {
  auto cfg = parse_config(text, "test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  return *cfg;
}

// Everything but the wall-clock fields.
nlohmann::json deterministic_part(nlohmann::json j) {
  for (auto key : {"wall_seconds", "simulated_per_wall", "messages_per_second"})
    j.erase(key);
  return j;
}

} // namespace

TEST(simulation, same_input_same_report) {
  auto cfg = config_of("");
  auto t = mooncake(150);
  auto a = run_simulation(cfg, requests_of(t));
  auto b = run_simulation(cfg, requests_of(t));
  auto ja = deterministic_part(report_json(cfg, a, {"c", "t"}));
  auto jb = deterministic_part(report_json(cfg, b, {"c", "t"}));
  EXPECT_EQ(ja.dump(), jb.dump());
  EXPECT_EQ(a.metrics.scheduler.requests_completed, 150u);
}

TEST(simulation, blocks_are_conserved_and_never_read_while_moving) {
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"20GB\"\n[tiers.dram]\ncapacity = \"40GB\"\n");
  auto r = run_simulation(cfg, requests_of(mooncake(200)));
  EXPECT_EQ(r.metrics.scheduler.requests_completed, 200u);
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = r.metrics.blocks.tiers[index_of(t)];
    EXPECT_EQ(m.allocated, m.freed) << name_of(t);
    EXPECT_GT(m.allocated, 0u) << name_of(t);
  }
  EXPECT_EQ(r.metrics.blocks.reads_while_moving, 0u);
  EXPECT_GT(r.h2d.bytes, 0u);
  EXPECT_GT(r.nvme_write.bytes, 0u);
}

// Short prompts, long answers: admission reserves room for prompts, so it is
// decoding growth that runs HBM out and forces preemption.
std::vector<sim_request> long_answers(uint32_t n) {
  std::vector<sim_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = i + 1;
    s.prompt_tokens = 1000;
    s.output_tokens = 3000;
    out.push_back({0.01 * i, std::move(s)});
  }
  return out;
}

TEST(simulation, tiny_hbm_preempts_and_still_completes_every_request) {
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"2GB\"\n[tiers.dram]\ncapacity = \"8GB\"\n");
  auto r = run_simulation(cfg, long_answers(40));
  const auto& s = r.metrics.scheduler;
  EXPECT_EQ(s.requests_completed, 40u);
  EXPECT_GT(s.preemptions_swap, 0u);
  EXPECT_EQ(r.metrics.blocks.swapped_out_blocks, r.metrics.blocks.swapped_in_blocks);
  for (auto t : {tier::hbm, tier::dram})
    EXPECT_EQ(r.metrics.blocks.tiers[index_of(t)].allocated, r.metrics.blocks.tiers[index_of(t)].freed);
}

TEST(simulation, recompute_only_preemption_completes_too) {
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"2GB\"\n[tiers.dram]\nenabled = false\n[tiers.nvme]\nenabled = "
                       "false\n[scheduler]\npreemption = \"recompute\"\n");
  auto r = run_simulation(cfg, long_answers(40));
  const auto& s = r.metrics.scheduler;
  EXPECT_EQ(s.requests_completed, 40u);
  EXPECT_EQ(s.preemptions_swap, 0u);
  EXPECT_GT(s.preemptions_recompute, 0u);
  EXPECT_GT(s.recomputed_tokens, 0u);
  EXPECT_EQ(r.h2d.bytes, 0u);
}

TEST(simulation, unbounded_hbm_hits_no_more_than_the_ideal) {
  auto t = mooncake(400);
  // A tiny model: HBM holds every block of the run, so nothing is evicted or preempted.
  auto cfg = config_of("[model]\npreset = \"tiny-test\"\n[cache]\nblock_tokens = 512\n");
  auto timed = run_simulation(cfg, requests_of(t));
  auto ideal = ideal_prefix_reuse(t);
  uint64_t hits = 0;
  for (const auto& m : timed.metrics.blocks.tiers)
    hits += m.prefix_hit_blocks;
  EXPECT_EQ(timed.metrics.blocks.prompt_blocks, ideal.blocks);
  EXPECT_LE(hits, ideal.hit_blocks);
  EXPECT_EQ(timed.metrics.scheduler.preemptions_swap + timed.metrics.scheduler.preemptions_recompute, 0u);
  // Requests that overlap in time compute shared blocks twice: the timed run
  // may hit less than the ideal, never more.
  EXPECT_GT(hits, ideal.hit_blocks * 9 / 10);
}

TEST(cache_only, unbounded_mooncake_gives_the_ideal_ratio_exactly) {
  auto t = mooncake(0, 1.0);
  auto cfg = config_of("[cache]\nblock_tokens = 512\n");
  uint64_t blocks = 0;
  for (const auto& r : t.requests)
    blocks += (r.input_tokens + 511) / 512;
  auto r = run_cache_only(cfg, t, blocks);
  EXPECT_EQ(r.blocks.prompt_blocks, 288'500u);
  EXPECT_EQ(r.blocks.prompt_blocks - r.blocks.miss_blocks, 105'710u);
  EXPECT_NEAR(r.hit_ratio(), 0.36641, 5e-6);
}

TEST(cache_only, lower_tiers_catch_what_hbm_evicts) {
  auto t = mooncake(1000, 1.0);
  auto small = run_cache_only(
      config_of("[tiers.hbm]\ncapacity = \"8GB\"\n[tiers.dram]\nenabled = false\n[tiers.nvme]\nenabled = false\n"), t);
  auto tiered = run_cache_only(
      config_of("[tiers.hbm]\ncapacity = \"8GB\"\n[tiers.dram]\ncapacity = \"64GB\"\n[tiers.nvme]\nenabled = false\n"),
      t);
  EXPECT_EQ(small.blocks.tiers[index_of(tier::dram)].prefix_hit_blocks, 0u);
  EXPECT_GT(tiered.blocks.tiers[index_of(tier::dram)].prefix_hit_blocks, 0u);
  EXPECT_GT(tiered.hit_ratio(), small.hit_ratio());
  EXPECT_EQ(small.blocks.prompt_blocks, tiered.blocks.prompt_blocks);
}

TEST(simulation, synthetic_multi_tenant_sessions_complete) {
  synthetic_spec spec;
  spec.requests = 200;
  spec.rate_per_s = 4;
  spec.shared_prefix_tokens = 1024;
  spec.turns_per_session = 4;
  spec.tenants = 3;
  spec.input = length_distribution::lognormal(1500, 0.8, 16, 20000);
  spec.output = length_distribution::lognormal(200, 0.5, 1, 1000);
  auto t = generate_synthetic(spec);
  ASSERT_TRUE(t) << describe(t.error());
  auto cfg = config_of("");
  auto r = run_simulation(cfg, requests_of(*t));
  EXPECT_EQ(r.metrics.scheduler.requests_completed, 200u);
  uint64_t hits = 0;
  for (const auto& m : r.metrics.blocks.tiers)
    hits += m.prefix_hit_blocks;
  EXPECT_GT(hits, 0u); // sessions and system prompts are reused
}

TEST(simulation, compression_frees_blocks_and_quantized_offload_moves_fewer_bytes) {
  auto t = mooncake(300);
  auto plain = run_simulation(config_of("[tiers.hbm]\ncapacity = \"20GB\"\n"), requests_of(t));
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"20GB\"\n[compression]\npolicy = \"h2o\"\nkeep_ratio = 0.25\n"
                       "offload_dtype = \"fp8\"\n");
  EXPECT_EQ(cfg.offload_block_bytes(), 16u * 32 * 2 * 8 * 130); // fp8 + one fp16 scale per head vector
  auto compressed = run_simulation(cfg, requests_of(t));
  EXPECT_EQ(compressed.metrics.scheduler.requests_completed, 300u);
  EXPECT_GT(compressed.metrics.compression.runs, 250u);
  EXPECT_GT(compressed.metrics.compression.blocks_freed, 0u);
  EXPECT_TRUE(compressed.metrics.compression.quality_modeled);
  // Every move crosses PCIe at the quantized size.
  EXPECT_EQ(compressed.d2h.bytes % cfg.offload_block_bytes(), 0u);
  EXPECT_LT(compressed.d2h.bytes, plain.d2h.bytes);
  for (auto tr : {tier::hbm, tier::dram})
    EXPECT_EQ(compressed.metrics.blocks.tiers[index_of(tr)].allocated,
              compressed.metrics.blocks.tiers[index_of(tr)].freed);
}

TEST(oracle, belady_bounds_lru_and_reaches_the_ideal_with_room) {
  auto t = mooncake(2000, 1.0);
  auto cfg =
      config_of("[model]\npreset = \"tiny-test\"\n[cache]\nblock_tokens = 512\n[tiers.hbm]\ncapacity = \"64MB\"\n"
                "[tiers.dram]\nenabled = false\n[tiers.nvme]\nenabled = false\n");
  ASSERT_EQ(cfg.hbm_blocks(), 976u); // 64 MB of 64 KiB blocks
  auto lru = run_cache_only(cfg, t);
  auto bound = oracle_prefix_hits(t, 512, cfg.hbm_blocks());
  EXPECT_EQ(bound.blocks, lru.blocks.prompt_blocks);
  EXPECT_GE(bound.hit_blocks, lru.blocks.prompt_blocks - lru.blocks.miss_blocks);
  auto ideal = ideal_prefix_reuse(t);
  auto unbounded = oracle_prefix_hits(t, 512, ideal.blocks);
  EXPECT_EQ(unbounded.hit_blocks, ideal.hit_blocks);
  EXPECT_EQ(unbounded.evictions, 0u);
}

// One request of 10,240 tokens (640 blocks of Llama-3-8B, 2 MiB each) with an
// HBM of 512 blocks: chunks 1-4 fill HBM; chunk 5 spills the 128 oldest
// blocks and streams them; the first decode needs a block, spills a batch of
// 16 more (HBM / 32) and streams 144, as does the second. So 128 + 144 + 144
// blocks cross PCIe host to device in 3 steps, and nothing else does.
TEST(simulation, streamed_blocks_are_charged_to_pcie_exactly) {
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"1GiB\"\n[tiers.dram]\ncapacity = \"4GiB\"\n[tiers.nvme]\nenabled = "
                       "false\n[scheduler]\nprefill_chunk = 2048\n[cache]\nstream_from_dram = true\n");
  ASSERT_EQ(cfg.hbm_blocks(), 512u);
  request_spec s;
  s.id = 1;
  s.prompt_tokens = 10240;
  s.output_tokens = 3;
  std::vector<sim_request> one;
  one.push_back({0.0, s});
  auto r = run_simulation(cfg, one);
  const auto& m = r.metrics.scheduler;
  EXPECT_EQ(m.requests_completed, 1u);
  EXPECT_EQ(m.preemptions_swap + m.preemptions_recompute, 0u);
  EXPECT_EQ(m.streamed_blocks, 128u + 144u + 144u);
  EXPECT_EQ(m.streamed_steps, 3u);
  EXPECT_EQ(r.metrics.blocks.spilled_blocks, 144u);
  const uint64_t block = cfg.geometry.bytes_per_block();
  EXPECT_EQ(r.metrics.blocks.runs.pcie_h2d.blocks, 0u); // no promotion: every H2D byte is streamed
  EXPECT_EQ(r.h2d.bytes, m.streamed_blocks * block);
  EXPECT_EQ(r.h2d.operations, m.streamed_blocks);
  auto j = report_json(cfg, r, {"c", "t"});
  EXPECT_EQ(j["streaming"]["streamed_bytes"].get<uint64_t>(), 416u * block);

  // Promote-only: the request cannot be served, and says why.
  auto off = config_of("[tiers.hbm]\ncapacity = \"1GiB\"\n[tiers.dram]\ncapacity = \"4GiB\"\n[tiers.nvme]\nenabled = "
                       "false\n[cache]\nstream_from_dram = false\n");
  auto refused = run_simulation(off, one);
  EXPECT_EQ(refused.metrics.scheduler.requests_rejected, 1u);
  ASSERT_EQ(refused.metrics.scheduler.rejections.size(), 1u);
  EXPECT_NE(refused.metrics.scheduler.rejections[0].find("need 641 blocks of 16 tokens; HBM holds 512"),
            std::string::npos)
      << refused.metrics.scheduler.rejections[0];
}

TEST(simulation, a_request_larger_than_hbm_and_dram_is_refused_with_its_sizes) {
  auto cfg = config_of("[tiers.hbm]\ncapacity = \"1GiB\"\n[tiers.dram]\ncapacity = \"1GiB\"\n[tiers.nvme]\nenabled = "
                       "false\n[cache]\nstream_from_dram = true\n");
  request_spec s;
  s.id = 7;
  s.prompt_tokens = 20000;
  s.output_tokens = 1;
  std::vector<sim_request> one;
  one.push_back({0.0, s});
  auto r = run_simulation(cfg, one);
  EXPECT_EQ(r.metrics.scheduler.requests_rejected, 1u);
  EXPECT_EQ(r.metrics.scheduler.requests_completed, 0u);
  ASSERT_EQ(r.metrics.scheduler.rejections.size(), 1u);
  EXPECT_EQ(r.metrics.scheduler.rejections[0],
            "request 7: 20001 tokens (prompt 20000 + output 1) need 1251 blocks of 16 tokens; HBM (512) and DRAM (512) "
            "hold 1024 together ([tiers.hbm] and [tiers.dram] capacity)");
}

// Mooncake's longest prompts (15k-87k tokens, some larger than HBM) through
// 1,024 HBM blocks, both hierarchies: every request completes, nothing leaks.
// A sequence swapped out comes back only with room for its blocks and its
// next chunk, and one alone in HBM streams rather than fail: without either,
// a sequence swapped in, failed its first grow, was preempted and swapped in
// again at the same instant, for ever.
TEST(simulation, long_prompts_through_a_small_hbm_stream_and_every_request_completes) {
  struct expected {
    const char* cache;
    uint64_t streamed, spilled, swaps;
  };
  for (auto e : {expected{"", 30223985u, 70976u, 123u},
                 expected{"hierarchy = \"exclusive\"\ndemote_watermark = 0.2\n", 31285711u, 72723u, 147u}}) {
    SCOPED_TRACE(e.cache);
    auto cfg = config_of(
        std::string("[tiers.hbm]\ncapacity = \"2GiB\"\n[tiers.dram]\ncapacity = \"16GiB\"\n[cache]\n") + e.cache);
    ASSERT_EQ(cfg.hbm_blocks(), 1024u);
    auto r = run_simulation(cfg, requests_of(mooncake(200)));
    const auto& m = r.metrics.scheduler;
    EXPECT_EQ(m.requests_completed, 200u);
    EXPECT_EQ(m.requests_rejected, 0u);
    EXPECT_EQ(m.streamed_blocks, e.streamed);
    EXPECT_EQ(r.metrics.blocks.spilled_blocks, e.spilled);
    EXPECT_EQ(m.preemptions_swap, e.swaps);
    EXPECT_EQ(r.metrics.blocks.reads_while_moving, 0u);
    for (auto t : {tier::hbm, tier::dram, tier::nvme})
      EXPECT_EQ(r.metrics.blocks.tiers[index_of(t)].allocated, r.metrics.blocks.tiers[index_of(t)].freed) << name_of(t);
  }
}
