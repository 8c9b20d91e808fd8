#include "runtime/config.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

namespace {
std::string error_of(std::string_view text) {
  auto cfg = parse_config(text, "exp.toml");
  EXPECT_FALSE(cfg) << "expected an error";
  return cfg ? std::string{} : describe(cfg.error());
}
} // namespace

TEST(config, empty_file_is_llama3_8b_on_h200) {
  auto cfg = parse_config("", "empty.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->geometry.model.name, "llama-3-8b");
  EXPECT_EQ(cfg->hardware.gpu.hbm_bytes, 141'000'000'000u);
  EXPECT_DOUBLE_EQ(cfg->hardware.pcie.h2d.gbps, 50.4);
  EXPECT_EQ(cfg->weight_bytes(), 16'060'000'000u);
  // 141 GB - 16.06 GB weights - 4 GB reserve = 120.94 GB of 2 MiB blocks.
  EXPECT_EQ(cfg->hbm_blocks(), 120'940'000'000u / (2u << 20));
}

TEST(config, embedded_default_parses) {
  auto text = embedded_file("default.toml");
  ASSERT_TRUE(text);
  auto cfg = parse_config(*text, "default.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->tiers.dram.capacity_bytes, 256'000'000'000u);
  EXPECT_EQ(cfg->cache.block_tokens, 16u);
}

TEST(config, explicit_model_and_tiers) {
  auto cfg = parse_config(R"(
[model]
preset = "llama-3-70b"
dtype = "fp8"
weights_dtype = "fp8"
[tiers.hbm]
capacity = "40GB"
[tiers.dram]
capacity = "1TB"
[tiers.nvme]
enabled = false
[cache]
block_tokens = 32
)",
                          "x.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->geometry.dtype, kv_dtype::fp8);
  EXPECT_EQ(cfg->geometry.block_tokens, 32u);
  EXPECT_EQ(cfg->hbm_blocks(), 40'000'000'000u / (2u * 80 * 8 * 130 * 32));
  EXPECT_EQ(cfg->nvme_blocks(), 0u);
}

TEST(config, syntax_error_names_line_and_column) {
  EXPECT_EQ(error_of("[model]\npreset = \"llama-3-8b\nx = 1\n").substr(0, 13), "exp.toml:2:21");
}

TEST(config, unknown_key_suggests_the_closest) {
  EXPECT_EQ(error_of("[cache]\nblock_tokenz = 16\n"),
            "exp.toml:2:16: [cache] unknown key 'block_tokenz' (did you mean 'block_tokens'?); known keys: "
            "block_tokens, policy, hierarchy, demote_watermark, prefix_caching, slot_placement, stream_from_dram, "
            "stream_recent_tokens");
}

TEST(config, unknown_top_level_table) {
  EXPECT_EQ(error_of("[shceduler]\nmax_running = 4\n"),
            "exp.toml:1:1: unknown key 'shceduler' (did you mean 'scheduler'?); known keys: backend, model, "
            "hardware, tiers, cache, scheduler, compression, sim, copy, compute, cluster, remote");
}

TEST(config, compute_table_chooses_the_model_and_checks_its_dtype) {
  auto cfg = parse_config("[compute]\nkind = \"model\"\nweights_seed = 5\ntemperature = 0.7\n", "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->compute.kind, compute_kind::model);
  EXPECT_EQ(cfg->compute.weights_seed, 5u);
  EXPECT_EQ(cfg->compute.temperature, 0.7);
  EXPECT_EQ(cfg->geometry.model.vocab, 128256u); // the preset's, for seeded weights
  EXPECT_EQ(cfg->geometry.model.intermediate, 14336u);
  // float8 K/V (e4m3) is the model's too; int8 is not.
  auto fp8 = parse_config("[model]\ndtype = \"fp8\"\n[compute]\nkind = \"model\"\n", "exp.toml");
  ASSERT_TRUE(fp8) << describe(fp8.error());
  EXPECT_EQ(fp8->geometry.dtype, kv_dtype::fp8);
  EXPECT_EQ(fp8->compute.kind, compute_kind::model);
  EXPECT_EQ(error_of("[model]\ndtype = \"int8\"\n[compute]\nkind = \"model\"\n"),
            "exp.toml:4:8: [compute] kind: \"model\" keeps K/V in bf16 or float8 (e4m3): expected [model] dtype "
            "fp16, bf16 or fp8, got \"int8\"");
  // Compression compacts a model's sequences; only the oracle, which needs future queries, cannot.
  EXPECT_TRUE(parse_config("[compute]\nkind = \"model\"\n[compression]\npolicy = \"snapkv\"\n", "exp.toml"));
  EXPECT_EQ(error_of("[compute]\nkind = \"model\"\n[compression]\npolicy = \"oracle\"\n"),
            "exp.toml:4:10: [compression] policy: \"oracle\" scores tokens by future queries, which a served model "
            "does not have; expected h2o, snapkv, streaming_llm or another policy");
}

TEST(config, wrong_type) {
  EXPECT_EQ(error_of("[scheduler]\nmax_running = \"many\"\n"),
            "exp.toml:2:15: [scheduler] max_running: expected an integer in 1..65536, got the string \"many\"");
}

TEST(config, out_of_range) {
  EXPECT_EQ(error_of("[cache]\nblock_tokens = 0\n"),
            "exp.toml:2:16: [cache] block_tokens: expected an integer in 1..4096, got 0");
}

TEST(config, bad_choice_suggests) {
  EXPECT_EQ(error_of("[cache]\npolicy = \"lur\"\n"),
            "exp.toml:2:10: [cache] policy: expected one of lru, oracle, arc, s3fifo, lfuda, predictor, got \"lur\" "
            "(did you mean \"lru\"?)");
}

TEST(config, int4_row_is_a_kv_layout_not_a_weights_format) {
  EXPECT_EQ(parse_config("[model]\ndtype = \"int4_row\"\n", "exp.toml")->geometry.dtype, kv_dtype::int4_row);
  EXPECT_EQ(error_of("[model]\nweights_dtype = \"int4_row\"\n"),
            "exp.toml:2:17: [model] weights_dtype: int4_row is a KV layout (one scale per head_dim row), not a "
            "weights format; expected fp16, bf16, fp8, int8 or int4");
}

TEST(config, copy_engine_table) {
  auto cfg = parse_config("[copy]\nkernels = \"never\"\ncalibrate = false\n", "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->copy.kernels, copy_kernel_use::never);
  EXPECT_FALSE(cfg->copy.calibrate);
  EXPECT_EQ(parse_config("", "exp.toml")->copy.kernels, copy_kernel_use::on_demand);
  EXPECT_EQ(error_of("[copy]\nkernels = \"always\"\n"),
            "exp.toml:2:11: [copy] kernels: expected one of on_demand, never, got \"always\"");
  EXPECT_EQ(parse_config("", "exp.toml")->copy.dma_streams, 0u);
  EXPECT_EQ(parse_config("[copy]\ndma_streams = 4\n", "exp.toml")->copy.dma_streams, 4u);
  EXPECT_EQ(error_of("[copy]\ndma_streams = 9\n"),
            "exp.toml:2:15: [copy] dma_streams: expected an integer in 0..8, got 9");
}

TEST(config, unknown_model_preset) {
  auto e = error_of("[model]\npreset = \"llama-3-80b\"\n");
  EXPECT_NE(e.find("exp.toml:2:10: [model] preset: unknown model \"llama-3-80b\" (did you mean \"llama-3-8b\"?)"),
            std::string::npos)
      << e;
}

TEST(config, tier_larger_than_the_gpu) {
  EXPECT_EQ(error_of("[tiers.hbm]\ncapacity = \"200GB\"\n"),
            "exp.toml:2:12: [tiers.hbm] capacity: expected at most 112.63 GiB (the GPU's 131.32 GiB less weights "
            "14.96 GiB and reserve 3.73 GiB), got 186.26 GiB");
}

TEST(config, tier_larger_than_the_machine) {
  EXPECT_EQ(error_of("[tiers.dram]\ncapacity = \"3TB\"\n"),
            "exp.toml:2:12: [tiers.dram] capacity: expected at most 1.82 TiB (the machine's DRAM), got 2.73 TiB");
}

TEST(config, weights_that_do_not_fit) {
  auto e = error_of("[model]\npreset = \"llama-3-405b\"\n");
  EXPECT_NE(e.find("[tiers.hbm] capacity: the model's weights (754.37 GiB)"), std::string::npos) << e;
}

TEST(config, bad_size_string) {
  EXPECT_EQ(error_of("[tiers.dram]\ncapacity = \"lots\"\n"),
            "exp.toml:2:12: [tiers.dram] capacity: expected a size such as \"64GiB\" or \"141GB\", got \"lots\"");
}

TEST(config, unknown_hardware_profile) {
  auto e = error_of("[hardware]\nprofile = \"h20\"\n");
  EXPECT_NE(e.find("exp.toml:2:11: [hardware] profile: unknown hardware profile \"h20\" (did you mean \"h200\"?)"),
            std::string::npos)
      << e;
}

TEST(config, kv_heads_must_divide_query_heads) {
  EXPECT_EQ(error_of("[model]\npreset = \"llama-3-8b\"\nkv_heads = 5\n"),
            "exp.toml:3:12: [model] kv_heads: expected a divisor of query_heads (32), got 5");
}

TEST(config, missing_file) {
  auto cfg = load_config("/nonexistent/kvtier.toml");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(describe(cfg.error()), "/nonexistent/kvtier.toml: cannot open config file (No such file or directory)");
}
