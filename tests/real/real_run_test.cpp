#include "real/real_system.hpp"
#include "real/copy_engine.hpp"
#include "runtime/error.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

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
)",
                          "real_run_test.toml");
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
  EXPECT_GT(result->nvme_write.bytes, 0u); // DRAM demoted ahead to NVMe
  EXPECT_GT(result->metrics.blocks.tiers[index_of(tier::dram)].prefix_hit_blocks +
                result->metrics.blocks.tiers[index_of(tier::nvme)].prefix_hit_blocks,
            0u);
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = result->metrics.blocks.tiers[index_of(t)];
    EXPECT_EQ(m.allocated, m.freed) << name_of(t);
  }
  EXPECT_EQ(result->metrics.blocks.failed_transfers, 0u);
  EXPECT_EQ(result->metrics.blocks.corrupted_reads, 0u);
  std::filesystem::remove_all(dir);
}

// One copy per block over real bytes: demote-ahead copies a block down on the
// copy engine when it nears eviction, and a promotion that lands frees the
// copy it read; every page read back still passes its checksum.
TEST(real_run, exclusive_hierarchy_moves_blocks_with_real_copies) {
  auto dir = std::filesystem::temp_directory_path() / ("kvtier-real-exclusive-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto cfg = small_config(dir.string());
  cfg.cache.hierarchy = cache_hierarchy::exclusive;
  real_run_options o;
  const char* device = std::getenv("KVTIER_TEST_DEVICE");
  o.backend.device = device ? device : "cpu";
  o.backend.compute_time_scale = 0;
  auto result = run_real(cfg, requests(60), o);
  ASSERT_TRUE(result) << describe(result.error());
  const auto& s = result->metrics.scheduler;
  EXPECT_EQ(s.requests_completed, 60u);
  const auto& b = result->metrics.blocks;
  const auto& hbm = b.tiers[index_of(tier::hbm)];
  const auto& dram = b.tiers[index_of(tier::dram)];
  const auto& nvme = b.tiers[index_of(tier::nvme)];
  EXPECT_GT(hbm.demotions, 0u); // copied down on the copy engine
  EXPECT_GT(result->d2h.bytes, 0u);
  EXPECT_EQ(result->d2h.bytes % cfg.geometry.bytes_per_block(), 0u);
  EXPECT_GT(dram.promotions + nvme.promotions, 0u);
  // Every landed promotion freed the copy it read unless a reader still held it.
  EXPECT_GT(dram.copies_dropped + nvme.copies_dropped, 0u);
  EXPECT_LE(dram.copies_dropped + nvme.copies_dropped, dram.promotions + nvme.promotions + hbm.prefix_hit_blocks);
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = b.tiers[index_of(t)];
    EXPECT_EQ(m.allocated, m.freed) << name_of(t);
  }
  EXPECT_EQ(b.failed_transfers, 0u);
  EXPECT_EQ(b.corrupted_reads, 0u);
  EXPECT_EQ(b.reads_while_moving, 0u);
  std::filesystem::remove_all(dir);
}

// A cache policy in the real backend: S3-FIFO orders each tier's evictions
// (its victims demoted first, moved by the copy engine); every page read
// back passes its checksum and every slot allocated is freed.
TEST(real_run, a_cache_policy_orders_evictions_with_real_copies) {
  auto dir = std::filesystem::temp_directory_path() / ("kvtier-real-policy-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto cfg = small_config(dir.string());
  cfg.cache.hierarchy = cache_hierarchy::exclusive;
  cfg.cache.policy = eviction_policy::s3fifo;
  real_run_options o;
  const char* device = std::getenv("KVTIER_TEST_DEVICE");
  o.backend.device = device ? device : "cpu";
  o.backend.compute_time_scale = 0;
  auto result = run_real(cfg, requests(60), o);
  ASSERT_TRUE(result) << describe(result.error());
  EXPECT_EQ(result->metrics.scheduler.requests_completed, 60u);
  const auto& b = result->metrics.blocks;
  EXPECT_GT(b.tiers[index_of(tier::hbm)].evictions, 0u); // the policy had to choose
  EXPECT_GT(b.tiers[index_of(tier::hbm)].demotions, 0u);
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = b.tiers[index_of(t)];
    EXPECT_EQ(m.allocated, m.freed) << name_of(t);
  }
  EXPECT_EQ(b.failed_transfers, 0u);
  EXPECT_EQ(b.corrupted_reads, 0u);
  EXPECT_EQ(b.reads_while_moving, 0u);
  std::filesystem::remove_all(dir);
}

TEST(real_run, pools_larger_than_the_machine_are_refused) {
  auto cfg = *parse_config("backend = \"sim\"\n[tiers.hbm]\ncapacity = \"100GB\"\n[tiers.dram]\ncapacity = \"1TB\"\n",
                           "big.toml");
  real_backend_options o;
  o.device = "cpu";
  auto b = real_backend::open(cfg, o);
  ASSERT_FALSE(b);
  EXPECT_NE(describe(b.error()).find("big.toml: the CPU twin needs"), std::string::npos) << describe(b.error());
}

namespace {

// Requests sharing seven three-block system prompts (ids 1000+k, 2000+k,
// 3000+k, 64 tokens each) with a private tail: 256 prompt tokens, 8 blocks.
std::vector<real_run_request> shared_prompt_requests(uint32_t n, uint64_t first_id, uint64_t tail_base) {
  std::vector<real_run_request> out;
  for (uint32_t i = 0; i < n; ++i) {
    request_spec s;
    s.id = first_id + i;
    s.prompt_tokens = 256;
    s.output_tokens = 4;
    s.external_ids = {1000 + i % 7, 2000 + i % 7, 3000 + i % 7, tail_base + i};
    s.external_block_tokens = 64;
    out.push_back({0.001 * i, std::move(s)});
  }
  return out;
}

real_run_options cpu_run() {
  real_run_options o;
  const char* device = std::getenv("KVTIER_TEST_DEVICE");
  o.backend.device = device ? device : "cpu";
  o.backend.compute_time_scale = 0;
  return o;
}

} // namespace

// A restart reuses what the NVMe tier kept: the second run adopts the blocks
// the first left in the slot file, and a request whose prefix is among them
// hits NVMe for exactly its leading recovered blocks, read back verified.
TEST(real_run, a_restart_finds_what_the_nvme_tier_kept) {
  auto dir = std::filesystem::temp_directory_path() / ("kvtier-restart-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto cfg = small_config(dir.string());
  auto first = run_real(cfg, shared_prompt_requests(60, 1, 5000), cpu_run());
  ASSERT_TRUE(first) << describe(first.error());
  ASSERT_GT(first->nvme_write.bytes, 0u);
  EXPECT_EQ(first->metrics.blocks.nvme_recovered_blocks, 0u); // a fresh file holds nothing

  // What the slot file holds now, as a restarted store lists it.
  std::set<block_hash> kept;
  {
    auto backend = real_backend::open(cfg, cpu_run().backend);
    ASSERT_TRUE(backend) << describe(backend.error());
    ASSERT_NE((*backend)->pages(), nullptr);
    for (const auto& b : (*backend)->pages()->recovered_blocks())
      kept.insert(b.hash);
  }
  ASSERT_FALSE(kept.empty());

  // The system prompt most of whose leading blocks survived, behind a new tail.
  uint32_t best_k = 0, expected_hits = 0;
  for (uint32_t k = 0; k < 7; ++k) {
    std::vector<uint64_t> ids{1000 + k, 2000 + k, 3000 + k, 9000};
    auto chain = chain_from_external(ids, 64, 256, cfg.cache.block_tokens, tenant_salt{0});
    uint32_t leading = 0;
    while (leading < chain.size() && kept.count(chain[leading]))
      ++leading;
    if (leading > expected_hits)
      best_k = k, expected_hits = leading;
  }
  ASSERT_GT(expected_hits, 0u) << "no system prompt block reached NVMe in the first run";
  ASSERT_LE(expected_hits, 6u); // the new tail (blocks 6, 7) was never stored

  request_spec again;
  again.id = 1;
  again.prompt_tokens = 256;
  again.output_tokens = 4;
  again.external_ids = {1000 + best_k, 2000 + best_k, 3000 + best_k, 9000};
  again.external_block_tokens = 64;
  std::vector<real_run_request> one;
  one.push_back({0.0, std::move(again)});
  auto second = run_real(cfg, std::move(one), cpu_run());
  ASSERT_TRUE(second) << describe(second.error());
  const auto& b = second->metrics.blocks;
  EXPECT_EQ(b.nvme_recovered_blocks, kept.size());
  EXPECT_EQ(b.tiers[index_of(tier::hbm)].prefix_hit_blocks, 0u);
  EXPECT_EQ(b.tiers[index_of(tier::dram)].prefix_hit_blocks, 0u);
  EXPECT_EQ(b.tiers[index_of(tier::nvme)].prefix_hit_blocks, expected_hits);
  EXPECT_EQ(second->nvme_read.bytes, uint64_t{expected_hits} * cfg.geometry.bytes_per_block());
  EXPECT_EQ(b.corrupted_reads, 0u); // every page read back passed its checksum and header check
  EXPECT_EQ(b.failed_transfers, 0u);
  EXPECT_EQ(second->metrics.scheduler.requests_completed, 1u);
  std::filesystem::remove_all(dir);
}
