#pragma once
// A view of kvtier's HBM pool as the model reads it: the pool is layer-major
// (runtime/tier_layout.hpp), and one slot's slice of one layer holds K, then
// V, each [kv_head][token in block][head_dim] in bf16:
//   key(slot, layer, head, t)   = slice + (head * block_tokens + t) * head_dim
//   value(slot, layer, head, t) = key(...) + kv_heads * block_tokens * head_dim
// Logical token p of a sequence lives in slot block_table[p / block_tokens]
// at t = p % block_tokens.

#include "kernels/model/bf16.hpp"
#include "runtime/tier_layout.hpp"

#include <cstddef>
#include <cstdint>

namespace kvtier::model {

struct paged_kv_pool {
  std::byte* base = nullptr; // the pool's first byte (host memory for the CPU twin)
  tier_layout layout;        // layer_major
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t block_tokens = 0;

  /// Bytes of one slot's slice of one layer this view needs: K and V in bf16.
  static constexpr uint64_t layer_bytes_for(uint32_t kv_heads, uint32_t head_dim, uint32_t block_tokens) {
    return uint64_t{2} * kv_heads * block_tokens * head_dim * sizeof(bf16);
  }
  bool consistent() const {
    return base != nullptr && layout.order == slot_order::layer_major &&
        layout.layer_bytes == layer_bytes_for(kv_heads, head_dim, block_tokens);
  }

  bf16* key(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    auto* slice = reinterpret_cast<bf16*>(base + layout.offset(slot, layer));
    return slice + (size_t{head} * block_tokens + t) * head_dim;
  }
  bf16* value(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    return key(slot, layer, head, t) + size_t{kv_heads} * block_tokens * head_dim;
  }
};

} // namespace kvtier::model
