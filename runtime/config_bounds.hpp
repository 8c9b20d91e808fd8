#pragma once
// The domain of every number a config or hardware profile holds. The TOML
// readers check values against these as they read them (with the file's
// line), and validate() checks the same bounds again on a config however it
// was built or changed, so a value has one domain whatever its source.

#include "runtime/value_check.hpp"

#include <cstdint>
#include <limits>

namespace kvtier::config_bounds {

inline constexpr uint64_t petabyte = 1'000'000'000'000'000;
inline constexpr uint64_t any_u64 = std::numeric_limits<uint64_t>::max();

// Hardware profile.
inline constexpr bounds<uint64_t> host_bytes{0, petabyte}; // dram, nvme
inline constexpr bounds<uint64_t> gpu_hbm_bytes{1'000'000, petabyte};
inline constexpr bounds<double> gpu_hbm_gbps{1, 1e6};
inline constexpr bounds<double> gpu_bf16_tflops{0.1, 1e6};
inline constexpr bounds<double> efficiency{0.01, 1};
inline constexpr bounds<double> microseconds{0, 1e6};
inline constexpr bounds<uint64_t> gpu_reserved_bytes{0, petabyte};
inline constexpr bounds<double> link_gbps{0.001, 10'000};
inline constexpr bounds<double> iops{1, 1e9};
inline constexpr bounds<uint64_t> device_queue_depth{1, 65536};

// [model]
inline constexpr bounds<uint64_t> layers{1, 1024};
inline constexpr bounds<uint64_t> heads{1, 4096};
inline constexpr bounds<uint64_t> head_dim{1, 4096};
inline constexpr bounds<uint64_t> parameters{1, 100'000'000'000'000};
inline constexpr bounds<uint64_t> hidden{1, 1 << 20}; // hidden, intermediate
inline constexpr bounds<uint64_t> vocab{1, 1 << 24};

// [tiers.*]
inline constexpr bounds<uint64_t> tier_capacity{0, petabyte}; // and at least one block (validate)

/// Blocks of all tiers together (each costs host memory for metadata and the prefix index).
inline constexpr uint64_t max_total_blocks = uint64_t{1} << 25;

// [tiers.nvme] engine settings
inline constexpr bounds<uint64_t> nvme_queue_depth{1, 4096};
inline constexpr bounds<uint64_t> nvme_large_block{0, uint64_t{1} << 30};
inline constexpr bounds<uint64_t> nvme_retries{0, 100};
inline constexpr bounds<uint64_t> nvme_timeout_ms{1, 3'600'000};

// [cache]
inline constexpr bounds<uint64_t> block_tokens{1, 4096};
inline constexpr bounds<double> demote_watermark{0, 0.9};
inline constexpr bounds<uint64_t> stream_recent_tokens{0, uint64_t{1} << 24};

// [scheduler]
inline constexpr bounds<uint64_t> max_running{1, 65536};
inline constexpr bounds<uint64_t> batch_tokens{1, 1u << 24}; // max_batch_tokens, prefill_chunk

// [cluster]
inline constexpr bounds<uint64_t> cluster_replicas{1, 256};
inline constexpr bounds<uint64_t> cluster_pool{0, 256}; // prefill, decode
inline constexpr bounds<uint64_t> cluster_load_slack{0, 1u << 20};
inline constexpr bounds<uint64_t> cluster_threads{0, 256}; // 0: one per core

// [remote]
inline constexpr bounds<uint64_t> tcp_port{1, 65535};
inline constexpr bounds<uint64_t> remote_timeout_ms{1, 600'000};

// [compression]
inline constexpr bounds<double> keep_ratio{0.001, 1.0};
inline constexpr bounds<uint64_t> token_floor_cap{0, 1ull << 32}; // min_tokens, max_tokens
inline constexpr bounds<uint64_t> every_tokens{0, 1u << 30};

// [compute]
inline constexpr bounds<double> temperature{0, 100};

// [sim]
inline constexpr bounds<uint64_t> any_count{0, any_u64}; // max_requests
inline constexpr bounds<double> time_scale{1e-6, 1e6};
inline constexpr bounds<uint64_t> trace_block_tokens{1, 1u << 20};

} // namespace kvtier::config_bounds
