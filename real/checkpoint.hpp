#pragma once
// Reads a Hugging Face Llama checkpoint from a local folder: config.json for
// the shape, and the weights from model.safetensors or, when the folder has
// model.safetensors.index.json, from the shards its weight_map names.
// Tensors may be BF16, F16 or F32 (converted to bf16, round to nearest even);
// names are Hugging Face's (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight, absent when tie_word_embeddings).
//
// Every error names the file, the tensor or key, and what was expected.
// Nothing is downloaded.

#include "kernels/model/llama_weights.hpp"

#include <caf/expected.hpp>

#include <string>

namespace kvtier {

/// config.json's shape (rope_scaling of rope_type "llama3" included).
caf::expected<model::llama_config> read_checkpoint_config(const std::string& folder);

/// The whole model: its shape and every tensor.
caf::expected<model::llama_weights> load_checkpoint(const std::string& folder);

} // namespace kvtier
