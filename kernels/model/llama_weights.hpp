#pragma once
// The weights of a Llama-family decoder in bf16, laid out as Hugging Face
// stores them: every projection row-major [out_features][in_features].
//
// Invariants (shape_problem() checks them against a config): each tensor has
// exactly the element count its config implies; lm_head is empty when the
// config ties it to the embedding.

#include "kernels/model/bf16.hpp"
#include "kernels/model/llama_config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::model {

struct layer_weights {
  std::vector<bf16> attn_norm; // [hidden]
  std::vector<bf16> wq;        // [q_heads*head_dim][hidden]
  std::vector<bf16> wk;        // [kv_heads*head_dim][hidden]
  std::vector<bf16> wv;        // [kv_heads*head_dim][hidden]
  std::vector<bf16> wo;        // [hidden][q_heads*head_dim]
  std::vector<bf16> mlp_norm;  // [hidden]
  std::vector<bf16> w_gate;    // [intermediate][hidden]
  std::vector<bf16> w_up;      // [intermediate][hidden]
  std::vector<bf16> w_down;    // [hidden][intermediate]
};

struct llama_weights {
  llama_config config;
  std::vector<bf16> embed; // [vocab][hidden]
  std::vector<layer_weights> layers;
  std::vector<bf16> final_norm; // [hidden]
  std::vector<bf16> lm_head;    // [vocab][hidden]; empty when tied

  const std::vector<bf16>& output_matrix() const { return config.tied_embeddings ? embed : lm_head; }
  /// Empty when every tensor has its config's size, else the first that has not.
  std::string shape_problem() const;
};

/// Random weights for any shape, the same for the same seed on every
/// machine: projections uniform in +-1/sqrt(fan_in), norms near 1,
/// embeddings uniform in +-1. Timing and exactness need no trained model.
llama_weights seeded_weights(const llama_config& config, uint64_t seed);

} // namespace kvtier::model
