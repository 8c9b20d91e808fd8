#pragma once
// The shape of a Llama-family decoder: what the forward pass, the weights and
// the paged K/V pool agree on. Plain C++ (no library): the CUDA twin and the
// GPU-only build include it.
//
// Invariants of a valid config (valid() says which fails): every size > 0,
// q_heads a multiple of kv_heads (grouped-query attention: query head h
// reads KV head h / (q_heads / kv_heads)), head_dim even (RoPE rotates
// pairs), and for Llama-3 scaling high_freq_factor > low_freq_factor.

#include <cstdint>
#include <string>

namespace kvtier::model {

/// Llama-3's frequency-dependent RoPE scaling (rope_scaling.rope_type =
/// "llama3" in config.json): long wavelengths are stretched by `factor`,
/// short ones kept, the band between interpolated.
struct rope_scaling {
  bool enabled = false;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_positions = 8192;
};

struct llama_config {
  uint32_t vocab = 0;
  uint32_t hidden = 0;
  uint32_t intermediate = 0;
  uint32_t layers = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  double rms_eps = 1e-5;
  double rope_theta = 500000.0;
  rope_scaling scaling;
  bool tied_embeddings = false; // lm_head shares the embedding matrix

  uint32_t group() const { return q_heads / kv_heads; }
  /// Empty when the invariants hold, else what breaks them.
  std::string problem() const;
};

} // namespace kvtier::model
