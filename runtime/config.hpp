#pragma once
// kvtier's configuration as plain structs, loaded from TOML.
//
// A config names a model (preset or explicit shape), the hardware profile
// (configs/hardware/NAME.toml or built in), tier capacities, the block size,
// the policies, the scheduler's budgets and the backend. Every value has a
// default, so an empty file is a valid config (Llama-3-8B on one H200).

#include "runtime/hardware.hpp"
#include "runtime/kv_geometry.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kvtier {

struct tier_config {
  bool enabled = true;
  uint64_t capacity_bytes = 0; // 0 = derive (HBM: what the weights leave)
};

struct tiers_config {
  tier_config hbm;
  tier_config dram{true, 64'000'000'000};
  tier_config nvme{true, 512'000'000'000};
  std::string nvme_path = "/var/tmp/kvtier";
};

struct cache_config {
  uint32_t block_tokens = 16;
  std::string policy = "lru";       // lru | oracle
  double demote_watermark = 0.05;   // keep this fraction of HBM clean-free ahead of need
  bool prefix_caching = true;
};

struct scheduler_config {
  uint32_t max_running = 256;       // sequences in one batch
  uint32_t max_batch_tokens = 8192; // tokens per step (decodes + prefill chunks)
  uint32_t prefill_chunk = 2048;    // largest prefill piece one sequence takes per step
  std::string preemption = "auto";  // auto | swap | recompute
};

struct compression_config {
  // none, or a policy of compression/ (h2o, h2o_window, h2o_raw, snapkv,
  // streaming_llm, sliding_window, random, oracle); "ratio" keeps a plain share.
  std::string policy = "none";
  double keep_ratio = 1.0;          // share of a sequence's tokens kept
  uint64_t min_tokens = 0;          // floor, e.g. sinks + recent window
  uint64_t max_tokens = 0;          // cap (a fixed-size cache); 0 = none
  uint32_t every_tokens = 0;        // also compress every N decoded tokens; 0 = at prefill end only
  std::string offload_dtype = "none"; // quantize blocks leaving HBM: none | fp8 | int8 | int4
};

struct sim_config {
  std::string trace;                // path; empty = the bundled Mooncake conversation trace
  std::string trace_format = "auto";// auto | mooncake | azure | burstgpt | synthetic
  uint64_t seed = 1;
  uint64_t max_requests = 0;        // 0 = all
  double time_scale = 1.0;          // arrival-time multiplier (0.5 = twice the load)
  uint32_t trace_block_tokens = 512;// tokens per hash_id in Mooncake traces
  bool skip_bad = false;            // skip and count bad trace rows instead of failing
  bool has_synthetic = false;       // the file has a [sim.synthetic] table
};

/// The real backend's copy engine between HBM and DRAM (kernels/copy/).
struct copy_config {
  /// Copy kernels (sm_copy, split) for transfers a sequence waits on:
  /// "on_demand" (faster on small blocks, may slow concurrent compute a few %)
  /// or "never" (DMA only). Background and prefetch copies never use them.
  std::string kernels = "on_demand";
  bool calibrate = true;            // measure every copy path at start-up
};

struct config {
  std::string source = "<defaults>"; // file the config came from
  kv_geometry geometry;              // model + dtype + block_tokens
  std::string weights_dtype = "bf16";
  hardware_profile hardware;
  tiers_config tiers;
  cache_config cache;
  scheduler_config scheduler;
  compression_config compression;
  sim_config sim;
  copy_config copy;
  std::string backend = "sim";       // sim | real

  /// Bytes of model weights on the GPU.
  uint64_t weight_bytes() const;
  /// HBM bytes for KV: configured, or what the GPU has after weights and reserve.
  uint64_t hbm_kv_bytes() const;
  /// Slots per tier: capacity over bytes_per_block (0 when disabled).
  uint32_t hbm_blocks() const;
  uint32_t dram_blocks() const;
  uint32_t nvme_blocks() const;
  /// Bytes of one block below HBM: quantized when compression.offload_dtype is set.
  uint64_t offload_block_bytes() const;
};

/// Loads a config file. Errors are errc::invalid_config naming file:line:column and key.
caf::expected<config> load_config(const std::string& path);
/// Same from TOML text; `name` stands for the file in messages.
caf::expected<config> parse_config(std::string_view text, const std::string& name);

/// A hardware profile by name (built in) or by path (a .toml file).
caf::expected<hardware_profile> load_hardware_profile(const std::string& name_or_path);
caf::expected<hardware_profile> parse_hardware_profile(std::string_view text, const std::string& name);

/// Bytes per weight for "bf16", "fp16", "fp8", "int8", "int4".
caf::expected<double> weight_bytes_per_parameter(const std::string& dtype);

} // namespace kvtier
