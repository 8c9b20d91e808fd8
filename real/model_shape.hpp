#pragma once
// The Llama shape (kernels/model) a config's [model] describes, for seeded
// random weights: the preset's or the file's sizes, RoPE theta 500000 with
// Llama-3 scaling (factor 8 over an original 8192 positions; tiny-test
// scales over 64, so CI exercises every band). A model whose MLP width or
// vocabulary is unknown is an error naming the keys to set.

#include "kernels/model/llama_config.hpp"
#include "kernels/model/llama_weights.hpp"
#include "runtime/config.hpp"

#include <caf/expected.hpp>

namespace kvtier {

caf::expected<model::llama_config> llama_config_for(const config& cfg);

/// The weights [compute] asks for: the checkpoint in model_dir (whose KV
/// shape must be [model]'s, which sized the pools), else seeded random
/// weights for [model]'s shape.
caf::expected<model::llama_weights> model_weights_for(const config& cfg);

} // namespace kvtier
