#pragma once
// Paged attention of one query position over kvtier's pool (CPU twin), and
// the one place the CPU twin converts K/V to and from the pool's element type.
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

/// Writes one token's K and V rows (head_dim floats each) of one KV head:
/// rounded to bf16, or for a float8 pool e4m3(x / scale), nearest even,
/// saturated to +-448 (bit-exact with the CUDA twin's store_kv_fp8).
void store_kv_row(const paged_kv_pool& pool, uint32_t slot, uint32_t layer, uint32_t head, uint32_t t, const float* k,
                  const float* v);

/// Reads one token's K (or V, when `value`) row of one KV head as head_dim
/// floats: bf16 widened, or scale * e4m3 for a float8 pool.
void load_kv_row(const paged_kv_pool& pool, bool value, uint32_t slot, uint32_t layer, uint32_t head, uint32_t t,
                 float* row);

/// Writes q_heads * head_dim floats to `out`. When `block_mass` is non-null
/// (one float per table block) adds each block's attention probability,
/// summed over heads; so does `also_mass` (a second sum) when non-null.
/// `scores` is scratch, grown here as needed (the scores and one KV head's
/// rows as floats: (position + 1) * (1 + 2 * head_dim) floats).
void paged_attention(const paged_kv_pool& pool, uint32_t layer, std::span<const uint32_t> block_table,
                     const attention_query& query, float* out, std::vector<float>& scores, float* block_mass = nullptr,
                     float* also_mass = nullptr);

} // namespace kvtier::model
