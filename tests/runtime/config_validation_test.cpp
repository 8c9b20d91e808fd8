// Every configured value goes through one validation, whatever its source:
// the TOML file, a hardware profile, a command-line override or a library
// caller. Each row is a bad input a user could give; the error must name
// where (file:line:column or the flag), the key, and what was expected.

#include "runtime/config.hpp"
#include "runtime/config_overrides.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

using namespace kvtier;

namespace {

struct bad_file {
  const char* text;
  const char* error;
};

std::string error_of(std::string_view text) {
  auto cfg = parse_config(text, "exp.toml");
  return cfg ? std::string{"accepted"} : describe(cfg.error());
}

std::string override_error(const config_overrides& o, std::string_view file = "") {
  auto cfg = parse_config(file, "exp.toml");
  EXPECT_TRUE(cfg) << describe(cfg.error());
  auto err = apply_overrides(*cfg, o);
  return err ? describe(err) : std::string{"accepted"};
}

} // namespace

// NaN fails no `v < min || v > max` test; it must fail ours.
TEST(config_validation, non_finite_numbers_are_errors) {
  const bad_file rows[] = {
      {"[compression]\nkeep_ratio = nan\n",
       "exp.toml:2:14: [compression] keep_ratio: expected a number in 0.001..1, got nan"},
      {"[cache]\ndemote_watermark = nan\n",
       "exp.toml:2:20: [cache] demote_watermark: expected a number in 0..0.9, got nan"},
      {"[sim]\ntime_scale = inf\n", "exp.toml:2:14: [sim] time_scale: expected a number in 1e-06..1000000, got inf"},
      {"[sim]\ntime_scale = -1\n", "exp.toml:2:14: [sim] time_scale: expected a number in 1e-06..1000000, got -1"},
      {"[sim]\ntime_scale = 0\n", "exp.toml:2:14: [sim] time_scale: expected a number in 1e-06..1000000, got 0"},
      {"[sim.synthetic]\nrate_per_s = nan\n",
       "exp.toml:2:14: [sim.synthetic] rate_per_s: expected a number in 1e-09..1000000000, got nan"},
      {"[sim.synthetic]\ninput = { dist = \"lognormal\", mean = nan }\n",
       "exp.toml:2:38: [sim.synthetic.input] mean: expected a number in 1..16777216, got nan"},
  };
  for (const auto& row : rows)
    EXPECT_EQ(error_of(row.text), row.error) << row.text;
}

TEST(config_validation, hardware_profile_numbers_are_finite) {
  auto hw = parse_hardware_profile("[gpu]\nbf16_tflops = nan\n", "hw.toml");
  ASSERT_FALSE(hw);
  EXPECT_EQ(describe(hw.error()), "hw.toml:2:15: [gpu] bf16_tflops: expected a number in 0.1..1000000, got nan");
  hw = parse_hardware_profile("[pcie.h2d]\ngbps = -inf\n", "hw.toml");
  ASSERT_FALSE(hw);
  EXPECT_EQ(describe(hw.error()), "hw.toml:2:8: [pcie.h2d] gbps: expected a number in 0.001..10000, got -inf");
}

TEST(config_validation, sizes_that_overflow_are_errors) {
  EXPECT_EQ(error_of("[tiers.dram]\ncapacity = \"99999999999999999999GB\"\n"),
            "exp.toml:2:12: [tiers.dram] capacity: '99999999999999999999GB' is too large for a size: expected at most "
            "16 EiB");
  EXPECT_EQ(error_of("[tiers.dram]\ncapacity = \"20000PB\"\n"),
            "exp.toml:2:12: [tiers.dram] capacity: '20000PB' has unknown size unit 'PB': expected B, KB, MB, GB, TB, "
            "KiB, MiB, GiB or TiB");
}

// Values that used to be accepted and then ignored or read as something else.
TEST(config_validation, settings_that_would_be_ignored_are_errors) {
  const bad_file rows[] = {
      {"[tiers.hbm]\ncapacity = 0\n",
       "exp.toml:2:12: [tiers.hbm] capacity: expected \"auto\" or a size of at least one block, got 0 B"},
      {"[tiers.hbm]\ncapacity = \"0GB\"\n",
       "exp.toml:2:12: [tiers.hbm] capacity: expected \"auto\" or a size of at least one block, got 0 B"},
      {"[tiers.hbm]\ncapacity = \"1B\"\n",
       "exp.toml:2:12: [tiers.hbm] capacity: expected room for at least one 2.00 MiB block, got 1 B"},
      {"[tiers.hbm]\nenabled = false\n",
       "exp.toml:2:11: [tiers.hbm] enabled: HBM cannot be turned off: every step computes from it (lower its "
       "capacity instead)"},
      {"[tiers.dram]\ncapacity = \"auto\"\n",
       "exp.toml:2:12: [tiers.dram] capacity: \"auto\" is only for [tiers.hbm]; expected a size such as \"256GB\" (to "
       "turn the tier off, set enabled = false)"},
      {"[tiers.dram]\ncapacity = 0\n",
       "exp.toml:2:12: [tiers.dram] capacity: expected room for at least one 2.00 MiB block, got 0 B; to turn the "
       "tier off, set enabled = false"},
      {"[tiers.nvme]\ncapacity = \"1MB\"\n",
       "exp.toml:2:12: [tiers.nvme] capacity: expected room for at least one 2.00 MiB block, got 976.56 KiB; to turn "
       "the tier off, set enabled = false"},
      {"[tiers.nvme]\npath = \"\"\n",
       "exp.toml:2:8: [tiers.nvme] path: expected a directory for the slot file, got an empty string"},
      {"[model]\nmax_context = 1\n",
       "exp.toml:2:15: [model] max_context: kvtier does not use a model's context limit (a request is bounded by the "
       "HBM it needs); remove the key"},
      {"[sim]\nseed = 3\n",
       "exp.toml:2:8: [sim] seed: a replay draws nothing at random; a synthetic trace's seed is [sim.synthetic] seed"},
      {"[cache]\nblock_tokens = 1\n[tiers.nvme]\ncapacity = \"7TB\"\n",
       "exp.toml:2:16: [cache] block_tokens: blocks of 1 tokens make 54,816,740 blocks (HBM 922,698, DRAM 488,281, "
       "NVMe 53,405,761); kvtier keeps at most 33,554,432 (about 75 B of host memory each): raise block_tokens or "
       "lower the tier capacities"},
      {"[compression]\npolicy = \"h2o\"\nmin_tokens = 600\nmax_tokens = 500\n",
       "exp.toml:4:14: [compression] max_tokens: expected at least min_tokens (600) or 0 for no cap, got 500"},
      {"[compression]\nkeep_ratio = 0.5\n",
       "exp.toml:2:14: [compression] keep_ratio: has no effect while policy = \"none\"; set a policy or remove the "
       "key"},
      {"[cache]\nstream_from_dram = false\nstream_recent_tokens = 4096\n",
       "exp.toml:3:24: [cache] stream_recent_tokens: has no effect while stream_from_dram = false; turn streaming on "
       "or remove the key"},
      {"[cache]\nstream_recent_tokens = 99999999\n",
       "exp.toml:2:24: [cache] stream_recent_tokens: expected an integer in 0..16777216, got 99999999"},
  };
  for (const auto& row : rows)
    EXPECT_EQ(error_of(row.text), row.error) << row.text;
  // What these rows must not break: auto, an explicit tier off, no cap.
  EXPECT_EQ(error_of("[tiers.hbm]\ncapacity = \"auto\"\n[tiers.dram]\nenabled = false\ncapacity = 0\n"
                     "[compression]\npolicy = \"h2o\"\nmin_tokens = 600\n"),
            "accepted");
}

TEST(config_validation, offload_dtype_needs_16_bit_blocks_in_real_runs) {
  EXPECT_EQ(error_of("backend = \"real\"\n[tiers.dram]\ncapacity = \"8GB\"\n[tiers.nvme]\nenabled = false\n"
                     "[compression]\noffload_dtype = \"int4\"\n"),
            "accepted");
  // `kvtier run` of a simulated config turns the backend to real and validates again.
  auto cfg = parse_config("[compression]\noffload_dtype = \"fp8\"\n", "sim.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  cfg->backend = backend_kind::real;
  cfg->tiers.dram.capacity_bytes = 1'000'000'000;
  EXPECT_EQ(describe(validate(*cfg)), "no error");
  cfg->geometry.dtype = kv_dtype::int8;
  EXPECT_EQ(describe(validate(*cfg)),
            "sim.toml: [compression] offload_dtype: \"fp8\": the real engine quantizes fp16 or bf16 blocks on "
            "offload, but the KV cache is int8; set [model] dtype to fp16 or bf16, or offload_dtype to \"none\"");
  // An fp8 cache has nothing to quantize on offload, in any backend.
  for (const char* offload : {"fp8", "int8", "int4", "int4_row"}) {
    cfg->geometry.dtype = kv_dtype::fp8;
    cfg->compression.offload_dtype = parse_dtype(offload);
    for (auto backend : {backend_kind::real, backend_kind::sim}) {
      cfg->backend = backend;
      EXPECT_EQ(describe(validate(*cfg)),
                fmt::format("sim.toml: [compression] offload_dtype: \"{}\": the KV cache is fp8 already, and offload "
                            "quantizes 16-bit blocks; set offload_dtype to \"none\" (fp8 blocks move below HBM as "
                            "they are), or [model] dtype to fp16 or bf16",
                            offload));
    }
  }
}

TEST(config_validation, inputs_that_are_not_regular_files_are_errors) {
  auto dir = std::filesystem::temp_directory_path() / "kvtier_config_validation_dir";
  std::filesystem::create_directories(dir);
  auto as_config = load_config(dir.string());
  ASSERT_FALSE(as_config);
  EXPECT_EQ(describe(as_config.error()), dir.string() + ": config file is a directory, not a file");
  auto zero = load_config("/dev/zero");
  ASSERT_FALSE(zero);
  EXPECT_EQ(describe(zero.error()), "/dev/zero: config file is not a regular file");
  auto profile = load_hardware_profile(dir.string() + "/");
  ASSERT_FALSE(profile);
  EXPECT_EQ(describe(profile.error()), dir.string() + "/: hardware profile is a directory, not a file");
  auto in_config = parse_config("[hardware]\nprofile = \"/dev/zero\"\n", "exp.toml");
  ASSERT_FALSE(in_config);
  EXPECT_EQ(describe(in_config.error()),
            "exp.toml:2:11: [hardware] profile: /dev/zero: hardware profile is not a regular file");
  std::filesystem::remove(dir);
}

struct bad_flag {
  config_overrides given;
  const char* error;
};

TEST(config_validation, overrides_go_through_the_same_checks) {
  auto with = [](auto set) {
    config_overrides o;
    set(o);
    return o;
  };
  const bad_flag rows[] = {
      {with([](auto& o) { o.hbm = "1000TB"; }),
       "--hbm 1000TB: expected at most 112.63 GiB (the GPU's 131.32 GiB less weights 14.96 GiB and reserve 3.73 GiB), "
       "got 909.49 TiB"},
      {with([](auto& o) { o.hbm = "1B"; }), "--hbm 1B: expected room for at least one 2.00 MiB block, got 1 B"},
      {with([](auto& o) { o.hbm = "0"; }), "--hbm 0: expected \"auto\" or a size of at least one block, got 0 B"},
      {with([](auto& o) { o.hbm = "lots"; }),
       "--hbm lots: 'lots' is not a size: expected a number with an optional unit"},
      {with([](auto& o) { o.dram = "auto"; }),
       "--dram auto: \"auto\" is only for --hbm; expected a size, or 0 to turn the tier off"},
      {with([](auto& o) { o.dram = "3TB"; }),
       "--dram 3TB: expected at most 1.82 TiB (the machine's DRAM), got 2.73 TiB"},
      {with([](auto& o) { o.nvme = "99999999999999999999GB"; }),
       "--nvme 99999999999999999999GB: '99999999999999999999GB' is too large for a size: expected at most 16 EiB"},
      {with([](auto& o) { o.time_scale = "nan"; }), "--time-scale nan: expected a finite number, got \"nan\""},
      {with([](auto& o) { o.time_scale = "-1"; }), "--time-scale -1: expected a number in 1e-06..1000000, got -1"},
      {with([](auto& o) { o.time_scale = "0"; }), "--time-scale 0: expected a number in 1e-06..1000000, got 0"},
      {with([](auto& o) { o.time_scale = "1e7"; }),
       "--time-scale 1e7: expected a number in 1e-06..1000000, got 10000000"},
      {with([](auto& o) { o.max_requests = "-1"; }),
       "--max-requests -1: expected a whole number of at least 0, got \"-1\""},
      {with([](auto& o) { o.max_requests = "2.5"; }),
       "--max-requests 2.5: expected a whole number of at least 0, got \"2.5\""},
      {with([](auto& o) { o.max_requests = "99999999999999999999"; }),
       "--max-requests 99999999999999999999: expected a whole number below 2^64, got \"99999999999999999999\""},
      {with([](auto& o) { o.format = "csv"; }),
       "--format csv: expected one of auto, mooncake, azure, burstgpt, synthetic"},
      {with([](auto& o) { o.format = "synthetic"; }),
       "--format synthetic: \"synthetic\" needs a [sim.synthetic] table"},
  };
  for (const auto& row : rows)
    EXPECT_EQ(override_error(row.given), row.error) << row.error;
}

TEST(config_validation, overrides_that_are_valid_apply) {
  auto cfg = parse_config("[tiers.hbm]\ncapacity = \"20GB\"\n", "exp.toml");
  ASSERT_TRUE(cfg);
  config_overrides o;
  o.hbm = "auto";
  o.dram = "0";
  o.nvme = "1TB";
  o.time_scale = "0.5";
  o.max_requests = "50";
  o.format = "mooncake";
  ASSERT_FALSE(apply_overrides(*cfg, o));
  EXPECT_FALSE(cfg->tiers.hbm.capacity_bytes);
  EXPECT_FALSE(cfg->tiers.dram.enabled);
  EXPECT_EQ(cfg->dram_blocks(), 0u);
  EXPECT_EQ(cfg->tiers.nvme.capacity_bytes, 1'000'000'000'000u);
  EXPECT_DOUBLE_EQ(cfg->sim.time_scale, 0.5);
  EXPECT_EQ(cfg->sim.max_requests, 50u);
  EXPECT_EQ(cfg->sim.trace_format, trace_format_choice::mooncake);
}

// A config built or changed in code gets the checks a file gets.
TEST(config_validation, library_configs_are_validated_too) {
  config cfg;
  EXPECT_FALSE(validate(cfg)) << describe(validate(cfg));
  cfg.cache.demote_watermark = std::nan("");
  EXPECT_EQ(describe(validate(cfg)), "<defaults>: [cache] demote_watermark: expected a number in 0..0.9, got nan");
  cfg = config{};
  cfg.hardware.gpu.bf16_tflops = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(describe(validate(cfg)),
            "<defaults>: [hardware.gpu] bf16_tflops: expected a number in 0.1..1000000, got nan");
  cfg = config{};
  cfg.compression.keep_ratio = std::nan("");
  EXPECT_EQ(describe(validate(cfg)), "<defaults>: [compression] keep_ratio: expected a number in 0.001..1, got nan");
  cfg = config{};
  cfg.tiers.hbm.capacity_bytes = 1;
  EXPECT_EQ(describe(validate(cfg)),
            "<defaults>: [tiers.hbm] capacity: expected room for at least one 2.00 MiB block, got 1 B");
  cfg = config{};
  cfg.sim.synthetic = synthetic_spec{};
  cfg.sim.synthetic->input = length_distribution::uniform(50, 10);
  EXPECT_EQ(describe(validate(cfg)), "<defaults>: [sim.synthetic] input: min 50 is above max 10");
}
