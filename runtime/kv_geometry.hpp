#pragma once
// The shape of a model's KV cache and the memory math that follows from it.
//
// bytes_per_token = 2 (K and V) * layers * kv_heads * stored(head_dim), where
// stored() includes quantization scales (see dtype.hpp). GQA and MQA are
// expressed by kv_heads < query heads; only kv_heads enters the KV math.
// A block is block_tokens tokens of one sequence across all layers.

#include "runtime/dtype.hpp"

#include <cstdint>
#include <string>

namespace kvtier {

struct model_spec {
  std::string name;
  uint32_t layers = 0;
  uint32_t query_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint64_t parameters = 0;   // total weights, for the HBM budget and compute model
  uint32_t hidden = 0;       // model width, for the compute model
  uint32_t max_context = 0;  // tokens the model supports
  uint32_t intermediate = 0; // MLP width, for a real model's weights (0: unknown)
  uint32_t vocab = 0;        // vocabulary size, for a real model's weights (0: unknown)
};

struct kv_geometry {
  model_spec model;
  kv_dtype dtype = kv_dtype::fp16;
  uint32_t block_tokens = 16;

  /// K+V bytes of one token in one layer (all kv heads), scales included.
  uint64_t bytes_per_token_layer() const;
  /// K+V bytes of one token across all layers.
  uint64_t bytes_per_token() const;
  /// Bytes of one block: block_tokens tokens across all layers.
  uint64_t bytes_per_block() const;
  /// Bytes of one block's slice in one layer (the HBM layer-major unit).
  uint64_t bytes_per_block_layer() const;
  /// Blocks needed to hold `tokens` tokens (the last one may be partial).
  uint64_t blocks_for(uint64_t tokens) const;
  /// Bytes a context of `tokens` tokens occupies, rounded up to whole blocks.
  uint64_t bytes_for_context(uint64_t tokens) const;
};

} // namespace kvtier
