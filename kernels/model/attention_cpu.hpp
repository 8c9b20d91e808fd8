#pragma once
// Paged attention of one query position over kvtier's pool (CPU twin).
//
// For each query head h (KV head h / group): scores s_t = q.k_t / sqrt(d) for
// table entries t in [0, position] (entry t of a sequence lives in slot
// block_table[t / block_tokens]; a compacted table skips dropped blocks, so an
// entry's index may be below its token's position), softmax with the maximum subtracted, out = sum p_t v_t.
// Accumulation is float, in position order, so the result depends only on
// the K/V values, never on which slots hold them or how a prefill was cut
// into chunks.

#include "kernels/model/paged_kv.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::model {

struct attention_query {
  const float* q = nullptr; // q_heads * head_dim, RoPE applied
  uint32_t q_heads = 0;
  uint64_t position = 0; // its own table entry: attends to entries [0, position]
};

/// Writes q_heads * head_dim floats to `out`. When `block_mass` is non-null
/// (one float per table block) adds each block's attention probability,
/// summed over heads; so does `also_mass` (a second sum) when non-null.
/// `scores` is scratch of at least position + 1 floats.
void paged_attention(const paged_kv_pool& pool, uint32_t layer, std::span<const uint32_t> block_table,
                     const attention_query& query, float* out, std::vector<float>& scores, float* block_mass = nullptr,
                     float* also_mass = nullptr);

} // namespace kvtier::model
