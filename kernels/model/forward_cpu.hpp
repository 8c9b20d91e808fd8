#pragma once
// The Llama forward pass on the CPU: the reference the CUDA twin is checked
// against, and the model `kvtier run` serves where no GPU is used.
//
// Per sequence, layer by layer: RMSNorm, Q/K/V projections, RoPE, the K/V of
// positions >= context_tokens written into the pool slots the block table
// names, paged attention (position p attends to [0, p]), output projection
// and residual; RMSNorm, SwiGLU MLP and residual; then the final RMSNorm and
// the LM head for the last position only. Weights are bf16, K/V bf16 in the
// pool, activations and accumulation float.
//
// Determinism: every position's arithmetic is the same whatever the chunking
// of its prefill, the batch around it or the slots holding its blocks, so
// equal token sequences give bit-identical logits.

#include "kernels/model/llama_weights.hpp"
#include "kernels/model/paged_kv.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::model {

/// Copy-on-write: the first `tokens` tokens of a slot into another, every layer.
struct kv_copy {
  uint32_t from_slot;
  uint32_t to_slot;
  uint32_t tokens;
};

struct sequence_input {
  std::span<const uint32_t> tokens; // at positions first_position + i
  uint64_t first_position = 0;
  uint64_t context_tokens = 0;           // positions below are cached: their K/V are read, never written
  std::span<const uint32_t> block_table; // HBM slots, or paged_kv_pool::dram_entry(s) for streamed blocks
  bool want_block_mass = false;
};

struct sequence_result {
  std::vector<float> logits;     // vocab floats, for the last position
  std::vector<float> block_mass; // per logical block, when asked: summed over layers and heads
};

class cpu_forward {
public:
  /// REQUIRES: weights.shape_problem() is empty and pool.consistent() with
  /// the weights' kv_heads and head_dim. Neither is owned.
  cpu_forward(const llama_weights& weights, const paged_kv_pool& pool);

  void apply(const kv_copy& copy) const;
  sequence_result run(const sequence_input& input);

private:
  const llama_weights& w_;
  paged_kv_pool pool_;
  std::vector<double> inv_freq_;
  std::vector<float> scores_; // attention scratch
};

/// y[r] = sum_c m[r][c] * x[c] for a bf16 row-major [rows][cols] matrix.
void matvec(const std::vector<bf16>& m, uint32_t rows, uint32_t cols, const float* x, float* y);

/// out = x / rms(x) * weight.
void rms_norm(const float* x, const std::vector<bf16>& weight, uint32_t n, double eps, float* out);

} // namespace kvtier::model
