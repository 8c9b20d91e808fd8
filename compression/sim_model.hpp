#pragma once
// What the simulator's compression actor calls: how much of a request's KV
// cache remains after compression, and what that leaves in blocks and bytes,
// with no tensors involved. The modeled attention statistics (the harness's
// synthetic model, docs/compression.md) supply the quality side:
// modeled_quality runs the real policy on a short synthetic context and the
// caller memoizes it per (policy, budget).
//
// Every (layer, kv head) keeps budget.tokens(...) tokens; compaction
// (compaction.hpp) packs them, so the request needs blocks for its longest
// slice; the blocks past that are freed through the block manager.

#include "compression/budget.hpp"
#include "compression/harness.hpp"
#include "compression/schedule.hpp"
#include "runtime/kv_geometry.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kvtier::compression {

struct sim_policy {
  std::string policy = "h2o";  // a name from policy_names()
  budget_spec budget;          // e.g. ratio 0.2, min_tokens = sinks + recent
  compression_trigger trigger; // when the actor calls compressed_footprint
};

struct footprint {
  uint64_t tokens_before = 0;
  uint64_t tokens_kept = 0; // the longest slice after eviction
  uint64_t blocks_before = 0;
  uint64_t blocks_kept = 0;
  uint64_t blocks_freed = 0;  // blocks_before - blocks_kept: ordinary frees
  uint64_t hbm_bytes = 0;     // blocks_kept * bytes_per_block (geometry's dtype)
  uint64_t offload_bytes = 0; // bytes of the kept blocks in `offload_dtype`: what crosses PCIe and NVMe
};

/// The footprint of a request of `tokens` tokens after one compression pass.
/// `offload_dtype` is the dtype blocks are quantized to when demoted (fp16 = none).
footprint compressed_footprint(uint64_t tokens, const sim_policy& policy, const kv_geometry& geometry,
                               kv_dtype offload_dtype = kv_dtype::fp16);

struct quality_estimate {
  double out_err = 0; // relative attention-output error for future queries
  double mass = 0;    // softmax mass kept
  double needle = 0;  // needle recall (question visible at compression time)
};

/// A small model for modeled_quality: 512 tokens, 1 layer, 2 kv heads, group 4.
synthetic_config small_model();

/// Runs `policy` at keep ratio `ratio` on the synthetic model (structured
/// scenario and visible needles, `model.tokens` tokens; a few hundred keep it
/// under a second). Errors: errc::invalid_argument (unknown policy, bad ratio).
caf::expected<quality_estimate> modeled_quality(const std::string& policy, double ratio, const synthetic_config& model);

} // namespace kvtier::compression
