// Fuzz target: the TOML config reader, kvtier::parse_config(text, name).
// Invariants: a rejected config is an error that names the file; an accepted
// config holds only finite numbers, is meaningful (at least one HBM block,
// min_tokens <= max_tokens) and its derived sizes compute without undefined
// behaviour.

#include "tests/fuzz/fuzz_require.hpp"

#include "runtime/config.hpp"
#include "runtime/error.hpp"

#include <cmath>

namespace {

using kvtier::fuzz::fuzz_require;

void require_finite(double value, const char* key) {
  fuzz_require(std::isfinite(value), "accepted config has {} = {}", key, value);
}

void check_accepted(const kvtier::config& cfg) {
  require_finite(cfg.cache.demote_watermark, "cache.demote_watermark");
  require_finite(cfg.compression.keep_ratio, "compression.keep_ratio");
  require_finite(cfg.sim.time_scale, "sim.time_scale");
  const auto& gpu = cfg.hardware.gpu;
  require_finite(gpu.hbm_gbps, "hardware gpu.hbm_gbps");
  require_finite(gpu.bf16_tflops, "hardware gpu.bf16_tflops");
  require_finite(gpu.compute_efficiency, "hardware gpu.compute_efficiency");
  require_finite(gpu.memory_efficiency, "hardware gpu.memory_efficiency");
  fuzz_require(cfg.geometry.block_tokens > 0, "accepted config has block_tokens 0");
  fuzz_require(cfg.geometry.bytes_per_block() > 0, "accepted config has 0-byte blocks");
  // Every command needs one HBM block to run a sequence; fewer is a user's mistake to report here.
  fuzz_require(cfg.hbm_blocks() >= 1, "accepted config has no HBM block ({} B of HBM for KV, {} B a block)",
               cfg.hbm_kv_bytes(), cfg.geometry.bytes_per_block());
  const auto& c = cfg.compression;
  fuzz_require(c.max_tokens == 0 || c.min_tokens <= c.max_tokens,
               "accepted config has compression.min_tokens {} > max_tokens {}", c.min_tokens, c.max_tokens);
  // The derived sizes every command computes first (float-to-integer casts inside).
  (void)cfg.weight_bytes();
  (void)cfg.hbm_kv_bytes();
  (void)cfg.hbm_blocks();
  (void)cfg.dram_blocks();
  (void)cfg.nvme_blocks();
  (void)cfg.offload_block_bytes();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string name = "fuzz.toml";
  auto cfg = kvtier::parse_config(kvtier::fuzz::as_text(data, size), name);
  if (!cfg) {
    auto message = kvtier::describe(cfg.error());
    fuzz_require(message.find(name) != std::string::npos, "config error does not name the file: {}", message);
    return 0;
  }
  check_accepted(*cfg);
  return 0;
}
