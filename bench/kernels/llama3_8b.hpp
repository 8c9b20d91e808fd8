#pragma once
// The Llama-3-8B shape (Llama-3.1 RoPE scaling) the GPU benches time with
// random weights: bench/model and bench/stream.

#include "kernels/model/llama_config.hpp"

namespace kvtier::bench {

inline model::llama_config llama3_8b() {
  model::llama_config c;
  c.vocab = 128256;
  c.hidden = 4096;
  c.intermediate = 14336;
  c.layers = 32;
  c.q_heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.scaling.enabled = true;
  return c;
}

} // namespace kvtier::bench
