#include "real/real_system.hpp"
#include "real/copy_engine.hpp"
#include "runtime/error.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

using namespace kvtier;

namespace {

// A small model on the CPU twin and a slot file in a fresh directory: the
// whole graph with real bytes, fast enough for CI.
config small_config(const std::string& dir) {
  auto cfg = parse_config(R"(
backend = "real"
[model]
preset = "tiny-test"
[tiers.hbm]
capacity = "128KiB"
[tiers.dram]
capacity = "192KiB"
[tiers.nvme]
capacity = "1MiB"
engine = "threads"
[cache]
block_tokens = 32   # 4 KiB blocks: the smallest O_DIRECT unit
demote_watermark = 0.5
)", "real_run_test.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  cfg->tiers.nvme_path = dir;
  return *cfg;
}

std::vector<real_run_request> requests(uint32_t n) {
  std::vector<real_run_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = i + 1;
    s.prompt_tokens = 100 + 37 * (i % 5);
    s.output_tokens = 20;
    // Seven system prompts in turn: each comes back after six others pushed it down the tiers.
    s.external_ids = {1000 + i % 7, 5000 + i};
    s.external_block_tokens = 64;
    out.push_back({0.001 * i, std::move(s)});
  }
  return out;
}

} // namespace

TEST(real_run, serves_every_request_with_real_copies_and_pages) {
  auto dir = std::filesystem::temp_directory_path() / ("kvtier-real-run-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto cfg = small_config(dir.string());
  ASSERT_EQ(cfg.hbm_blocks(), 32u); // 128 KiB of 4 KiB blocks (tiny-test: 128 B per token)
  real_run_options o;
  // CI has no GPU: the CPU twin. KVTIER_TEST_DEVICE=auto runs the same test on a GPU.
  const char* device = std::getenv("KVTIER_TEST_DEVICE");
  o.backend.device = device ? device : "cpu";
  o.backend.compute_time_scale = 0;
  auto result = run_real(cfg, requests(60), o);
  ASSERT_TRUE(result) << describe(result.error());
  const auto& s = result->metrics.scheduler;
  EXPECT_EQ(s.requests_completed + s.requests_rejected, 60u);
  EXPECT_EQ(s.requests_rejected, 0u);
  EXPECT_GT(result->d2h.bytes, 0u);
  EXPECT_EQ(result->d2h.bytes % cfg.geometry.bytes_per_block(), 0u);
  EXPECT_GT(result->nvme_write.bytes, 0u);     // DRAM demoted ahead to NVMe
  EXPECT_GT(result->metrics.blocks.tiers[index_of(tier::dram)].prefix_hit_blocks + result->metrics.blocks.tiers[index_of(tier::nvme)].prefix_hit_blocks, 0u);
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = result->metrics.blocks.tiers[index_of(t)];
    EXPECT_EQ(m.allocated, m.freed) << name_of(t);
  }
  EXPECT_EQ(result->metrics.blocks.failed_transfers, 0u);
  EXPECT_EQ(result->metrics.blocks.corrupted_reads, 0u);
  std::filesystem::remove_all(dir);
}

TEST(real_run, pools_larger_than_the_machine_are_refused) {
  auto cfg = *parse_config("backend = \"sim\"\n[tiers.hbm]\ncapacity = \"100GB\"\n[tiers.dram]\ncapacity = \"1TB\"\n", "big.toml");
  real_backend_options o;
  o.device = "cpu";
  auto b = real_backend::open(cfg, o);
  ASSERT_FALSE(b);
  EXPECT_NE(describe(b.error()).find("big.toml: the CPU twin needs"), std::string::npos) << describe(b.error());
}
