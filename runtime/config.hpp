#pragma once
// kvtier's configuration: typed sections, read once from TOML.
//
// A config names a model (preset or explicit shape), the hardware profile
// (configs/hardware/NAME.toml or built in), tier capacities, the block size,
// the policies, the scheduler's budgets and the backend. Every value has a
// default, so an empty file is a valid config (Llama-3-8B on one H200).
//
// Invariants of a config returned by parse_config / load_config, or accepted
// by validate(): every number is finite and inside its bound
// (runtime/config_bounds.hpp); every choice is an enum, never a string; HBM
// holds at least one block; lower tiers are enabled with a capacity of at
// least one block or disabled. Code that changes a config after loading it
// (command-line overrides, library callers) calls validate() again.
//
// Where each part lives: this header (the sections), config_names (the
// spellings of the enums), config_reader.cpp (the TOML tables),
// config_validate.cpp (one check for every value, whatever its source),
// config_overrides (command-line values), hardware_profile (the hardware
// table files, read and written) and capacity_plan (the HBM budget).

#include "runtime/dtype.hpp"
#include "runtime/cluster_config.hpp"
#include "runtime/hardware.hpp"
#include "runtime/kv_geometry.hpp"
#include "runtime/nvme_settings.hpp"
#include "runtime/remote_config.hpp"
#include "runtime/slot_placement.hpp"
#include "runtime/synthetic_spec.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvtier {

enum class backend_kind : uint8_t { sim, real };
/// Which block a tier gives up. The block manager runs lru; oracle (Belady)
/// and the policies of cache/ run in `kvtier sim --cache-only`.
enum class eviction_policy : uint8_t { lru, oracle, arc, s3fifo, lfuda, predictor };
/// inclusive: a block may have copies in several tiers (the block manager's
/// way); exclusive: one copy, victims move down and hits move up.
enum class cache_hierarchy : uint8_t { inclusive, exclusive };
enum class preemption_mode : uint8_t { automatic, swap, recompute };
/// none, a plain share ("ratio"), or a policy of compression/.
enum class compression_policy : uint8_t {
  none,
  ratio,
  h2o,
  h2o_window,
  h2o_raw,
  snapkv,
  streaming_llm,
  sliding_window,
  random,
  oracle
};
enum class trace_format_choice : uint8_t { automatic, mooncake, azure, burstgpt, synthetic };
/// Copy kernels (sm_copy, split) for transfers a sequence waits on:
/// on_demand (faster on small blocks, may slow concurrent compute a few %)
/// or never (DMA only). Background and prefetch copies never use them.
enum class copy_kernel_use : uint8_t { on_demand, never };

struct hbm_tier_config {
  std::optional<uint64_t> capacity_bytes; // nullopt = "auto": what the weights and reserve leave
};

struct tier_config {
  bool enabled = true;
  uint64_t capacity_bytes = 0;
};

struct tiers_config {
  hbm_tier_config hbm;
  tier_config dram{true, 64'000'000'000};
  tier_config nvme{true, 512'000'000'000};
  std::string nvme_path = "/var/tmp/kvtier";
  nvme_settings nvme_io; // [tiers.nvme] engine, queue_depth, ...
};

struct cache_config {
  uint32_t block_tokens = 16;
  eviction_policy policy = eviction_policy::lru;
  cache_hierarchy hierarchy = cache_hierarchy::inclusive;
  double demote_watermark = 0.05; // keep this fraction of HBM clean-free ahead of need
  bool prefix_caching = true;
  slot_placement_kind slot_placement = slot_placement_kind::contiguous; // where blocks below HBM land
  // A sequence larger than HBM keeps its cold blocks in DRAM and each step
  // reads them from there (docs/model.md); off: such requests are refused.
  bool stream_from_dram = true;
  uint64_t stream_recent_tokens = 1024; // the newest tokens a streaming sequence keeps in HBM
};

struct scheduler_config {
  uint32_t max_running = 256;       // sequences in one batch
  uint32_t max_batch_tokens = 8192; // tokens per step (decodes + prefill chunks)
  uint32_t prefill_chunk = 2048;    // largest prefill piece one sequence takes per step
  preemption_mode preemption = preemption_mode::automatic;
};

struct compression_config {
  compression_policy policy = compression_policy::none;
  double keep_ratio = 1.0;   // share of a sequence's tokens kept
  uint64_t min_tokens = 0;   // floor, e.g. sinks + recent window
  uint64_t max_tokens = 0;   // cap (a fixed-size cache); 0 = none
  uint32_t every_tokens = 0; // also compress every N decoded tokens; 0 = at prefill end only
  /// Quantize blocks leaving HBM (fp8, int8, int4 or int4_row); nullopt = keep the KV dtype.
  /// Simulated runs only until the real engine quantizes.
  std::optional<kv_dtype> offload_dtype;
};

struct sim_config {
  std::string trace; // path; empty = the bundled Mooncake conversation trace
  trace_format_choice trace_format = trace_format_choice::automatic;
  uint64_t max_requests = 0;               // 0 = all
  double time_scale = 1.0;                 // arrival-time multiplier (0.5 = twice the load)
  uint32_t trace_block_tokens = 512;       // tokens per hash_id in Mooncake traces
  bool skip_bad = false;                   // skip and count bad trace rows instead of failing
  std::optional<synthetic_spec> synthetic; // the [sim.synthetic] table, when the file has one
};

/// The real backend's copy engine between HBM and DRAM (kernels/copy/).
struct copy_config {
  copy_kernel_use kernels = copy_kernel_use::on_demand;
  bool calibrate = true; // measure every copy path at start-up
  /// Streams (so copy engines) a request's DMAs are spread over in each
  /// direction; 0 = the fewest within 3% of the fastest, measured at start-up,
  /// at most 2 unless CUDA_DEVICE_MAX_CONNECTIONS >= 32 (docs/transfer.md).
  uint32_t dma_streams = 0;
};

/// What computes a real run's steps: a roofline stand-in that takes each
/// step as long as the cost model says ("modeled"), or the Llama-family
/// model of kernels/model ("model"), with seeded random weights for the
/// [model] shape or a Hugging Face checkpoint from `model_dir`.
enum class compute_kind : uint8_t { modeled, model };

struct compute_config {
  compute_kind kind = compute_kind::modeled;
  std::string model_dir;     // a local Hugging Face Llama checkpoint; empty = seeded random weights
  uint64_t weights_seed = 1; // random weights' seed
  double temperature = 0;    // 0 = greedy; else seeded sampling
  uint64_t sampling_seed = 0;
};

/// Llama-3-8B, fp16 KV, 16-token blocks: what an empty config file means.
kv_geometry default_geometry();

struct config {
  std::string source = "<defaults>";         // file the config came from
  kv_geometry geometry = default_geometry(); // model + dtype + block_tokens
  kv_dtype weights_dtype = kv_dtype::bf16;
  hardware_profile hardware;
  tiers_config tiers;
  cache_config cache;
  scheduler_config scheduler;
  compression_config compression;
  sim_config sim;
  copy_config copy;
  compute_config compute;
  cluster_config cluster;
  remote_config remote; // [remote]: the real run's remote tier
  backend_kind backend = backend_kind::sim;

  /// Bytes of model weights on the GPU.
  uint64_t weight_bytes() const;
  /// HBM bytes for KV: configured, or what the GPU has after weights and reserve (capacity_plan.hpp).
  uint64_t hbm_kv_bytes() const;
  /// Slots per tier: capacity over bytes_per_block (0 when disabled).
  uint32_t hbm_blocks() const;
  uint32_t dram_blocks() const;
  uint32_t nvme_blocks() const;
  /// Whether a sequence larger than HBM streams its cold blocks from DRAM:
  /// [cache] stream_from_dram with a DRAM tier, unless a model would read
  /// blocks that DRAM holds quantized (offload_dtype): it reads 16-bit K/V.
  bool streams_from_dram() const;
  /// [cache] stream_recent_tokens in whole blocks.
  uint32_t stream_recent_blocks() const;
  /// Slots of the real run's remote tier: [cluster] remote_capacity when
  /// [remote] kind names a server and the backend is real, else 0.
  uint32_t remote_blocks() const;
  /// Slots of the block manager's lowest tier: the NVMe tier, or the remote
  /// tier that takes its place in a real run (never both: validate).
  uint32_t lowest_tier_blocks() const;
  /// Bytes of one block below HBM: quantized when compression.offload_dtype is set.
  uint64_t offload_block_bytes() const;
};

/// Loads a config file (a regular file of at most 16 MiB). Errors are
/// errc::invalid_config naming file:line:column, the table and the key.
caf::expected<config> load_config(const std::string& path);
/// Same from TOML text; `name` stands for the file in messages.
caf::expected<config> parse_config(std::string_view text, const std::string& name);

/// A value validate() refused: the table and key it belongs to, and what was
/// expected ("expected a number in 0..0.9, got nan").
struct config_problem {
  std::string table; // "cache", "tiers.hbm", "" for top-level keys
  std::string key;
  std::string what;
};

/// Checks every value of `cfg`, whatever set it: bounds, finiteness, choices
/// that contradict each other, capacities against the hardware. The first
/// problem found, or nullopt.
std::optional<config_problem> find_problem(const config& cfg);
/// find_problem as an error: errc::invalid_config "SOURCE: [table] key: what".
caf::error validate(const config& cfg);

} // namespace kvtier
