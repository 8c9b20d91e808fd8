#pragma once
// A view of kvtier's HBM pool as the model reads it: the pool is layer-major
// (runtime/tier_layout.hpp), and one slot's slice of one layer holds K, then
// V, each [kv_head][token in block][head_dim] in bf16:
//   key(slot, layer, head, t)   = slice + (head * block_tokens + t) * head_dim
//   value(slot, layer, head, t) = key(...) + kv_heads * block_tokens * head_dim
// Logical token p of a sequence lives in slot block_table[p / block_tokens]
// at t = p % block_tokens.
//
// Float8 KV (`kv_fp8`): the same order at one e4m3 byte an element
// (key_bytes / value_bytes), written as e4m3(K / k_scale) rounded to nearest
// even and saturated to +-448 (kernels/quant/fp8_e4m3.hpp), read as
// k_scale * K and v_scale * V. The CPU twin reads and writes it everywhere;
// the CUDA twin in its decode steps only (its prefill kernels read bf16).
// The scales are per pool, so a slice may end in room kvtier's fp8 dtype
// budgets for an fp16 scale per vector (runtime/dtype.hpp): 2 bytes per
// (K or V, head, token) after K and V, never read or written here.
//
// Streamed blocks: a block-table entry with `dram_bit` set names a slot of the
// DRAM pool (block-major, runtime/tier_layout.hpp: one block's layers are
// contiguous) instead of an HBM slot. Attention reads it where it lies (the
// CPU twin) or from an HBM staging copy made layer by layer (the CUDA twin);
// its bytes are the same either way. New tokens' K/V are never written to a
// streamed block: the blocks a step writes are in HBM.

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
  /// The DRAM pool, for streamed blocks (null when nothing streams): host
  /// memory, pinned for the CUDA twin; same layers and layer_bytes as HBM.
  std::byte* dram_base = nullptr;
  tier_layout dram_layout; // block_major
  bool kv_fp8 = false;
  float k_scale = 1;
  float v_scale = 1;

  static constexpr uint32_t dram_bit = 0x8000'0000u;
  static constexpr bool streamed(uint32_t entry) { return (entry & dram_bit) != 0; }
  static constexpr uint32_t dram_entry(uint32_t dram_slot) { return dram_slot | dram_bit; }

  /// Bytes of one slot's slice of one layer this view needs: K and V in bf16
  /// (or float8).
  static constexpr uint64_t layer_bytes_for(uint32_t kv_heads, uint32_t head_dim, uint32_t block_tokens,
                                            bool fp8 = false) {
    return uint64_t{2} * kv_heads * block_tokens * head_dim * (fp8 ? 1 : sizeof(bf16));
  }
  /// The unused per-vector scale room of a float8 slice sized by kvtier's
  /// fp8 dtype (2 bytes per K or V vector).
  static constexpr uint64_t fp8_vector_scale_bytes(uint32_t kv_heads, uint32_t block_tokens) {
    return uint64_t{2} * kv_heads * block_tokens * 2;
  }
  /// layer_bytes is K and V exactly, or for float8 also the per-vector scale room.
  bool consistent() const {
    const uint64_t kv = layer_bytes_for(kv_heads, head_dim, block_tokens, kv_fp8);
    return base != nullptr && layout.order == slot_order::layer_major &&
        (layout.layer_bytes == kv ||
         (kv_fp8 && layout.layer_bytes == kv + fp8_vector_scale_bytes(kv_heads, block_tokens)));
  }
  uint32_t element_bytes() const { return kv_fp8 ? 1 : sizeof(bf16); }

  bool dram_consistent() const {
    return dram_base != nullptr && dram_layout.order == slot_order::block_major &&
        dram_layout.layers == layout.layers && dram_layout.layer_bytes == layout.layer_bytes;
  }

  /// `slot` is a block-table entry: an HBM slot, or dram_entry(s).
  std::byte* slice(uint32_t slot, uint32_t layer) const {
    return streamed(slot) ? dram_base + dram_layout.offset(slot & ~dram_bit, layer) : base + layout.offset(slot, layer);
  }
  /// bf16 pools (REQUIRES: !kv_fp8).
  bf16* key(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    return reinterpret_cast<bf16*>(slice(slot, layer)) + (size_t{head} * block_tokens + t) * head_dim;
  }
  bf16* value(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    return key(slot, layer, head, t) + size_t{kv_heads} * block_tokens * head_dim;
  }
  /// Float8 pools (REQUIRES: kv_fp8): e4m3 bytes, the same element order.
  uint8_t* key_bytes(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    return reinterpret_cast<uint8_t*>(slice(slot, layer)) + (size_t{head} * block_tokens + t) * head_dim;
  }
  uint8_t* value_bytes(uint32_t slot, uint32_t layer, uint32_t head, uint32_t t) const {
    return key_bytes(slot, layer, head, t) + size_t{kv_heads} * block_tokens * head_dim;
  }
};

} // namespace kvtier::model
