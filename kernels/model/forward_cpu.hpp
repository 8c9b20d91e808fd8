#pragma once
// The Llama forward pass on the CPU: the reference the CUDA twin is checked
// against, and the model `kvtier run` serves where no GPU is used.
//
// Per sequence, layer by layer: RMSNorm, Q/K/V projections, RoPE (by the
// absolute position), the K/V of positions >= context_tokens written into the
// pool slots the block table names, paged attention (position p attends to
// table entries [0, p - dropped_tokens]: a compacted table holds only the
// blocks compression kept), output projection
// and residual; RMSNorm, SwiGLU MLP and residual; then the final RMSNorm and
// the LM head for the last position only. Weights are bf16, K/V in the pool
// bf16 or float8 (kv_fp8: written e4m3(x / scale) saturated, read scale * e4m3,
// as the CUDA twin's decode does; copy-on-write and block mass too),
// activations and accumulation float.
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
  uint32_t mass_queries = 1; // block_mass sums the last this many positions' attention (clamped to the step)
  /// Positions below context_tokens whose blocks compression dropped from
  /// the table: position p >= first_position is table entry p - dropped_tokens.
  uint64_t dropped_tokens = 0;
};

struct sequence_result {
  std::vector<float> logits;          // vocab floats, for the last position
  std::vector<float> block_mass;      // per table block, when asked: summed over layers, heads and mass_queries
  std::vector<float> last_block_mass; // per table block, when asked: the last position's alone
};

class cpu_forward {
public:
  /// REQUIRES: weights.shape_problem() is empty and pool.consistent() with
  /// the weights' kv_heads and head_dim; float8 scales finite and positive.
  /// Neither is owned.
  cpu_forward(const llama_weights& weights, const paged_kv_pool& pool);

  void apply(const kv_copy& copy) const;
  sequence_result run(const sequence_input& input);

private:
  const llama_weights& w_;
  paged_kv_pool pool_;
  std::vector<double> inv_freq_;
  std::vector<float> scores_; // attention scratch
};

/// sum_c w[c] * x[c], as eight interleaved partial sums added pairwise: the
/// order every product of the CPU twin uses.
float dot(const bf16* w, const float* x, uint32_t n);

/// y[r] = dot(m[r], x) for a bf16 row-major [rows][cols] matrix.
void matvec(const std::vector<bf16>& m, uint32_t rows, uint32_t cols, const float* x, float* y);

/// y[i][r] = dot(m[r], x[i]) for n row vectors x[i] of cols floats (y is [n][rows]).
void matmul(const std::vector<bf16>& m, uint32_t rows, uint32_t cols, const float* x, size_t n, float* y);

/// out = x / rms(x) * weight.
void rms_norm(const float* x, const std::vector<bf16>& weight, uint32_t n, double eps, float* out);

} // namespace kvtier::model
