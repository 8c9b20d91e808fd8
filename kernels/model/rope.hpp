#pragma once
// Rotary position embedding, Hugging Face Llama convention: dimension j of a
// head (j < head_dim/2) rotates with dimension j + head_dim/2 by the angle
// position * inv_freq[j].

#include "kernels/model/llama_config.hpp"

#include <cstdint>
#include <vector>

namespace kvtier::model {

/// head_dim/2 inverse frequencies theta^(-2j/head_dim), with Llama-3
/// scaling applied when the config enables it.
std::vector<double> rope_inv_freq(const llama_config& cfg);

/// Rotates `heads` consecutive head vectors of `head_dim` floats in place.
void apply_rope(float* vectors, uint32_t heads, uint32_t head_dim, uint64_t position,
                const std::vector<double>& inv_freq);

} // namespace kvtier::model
