#pragma once
// Quantize-on-offload for one KV block: which format each (layer, K or V)
// slice of a block takes when it leaves HBM, where it lands in the packed
// block, and how many bytes cross PCIe and land on NVMe.
//
// Source layout (fp16): for each layer, K then V, each a slice of
// [kv_heads][block_tokens][head_dim] (one tile of kv_heads slices).
// Packed layout: the same order; each slice is the packed tile of its format
// (quant_format.hpp) or raw fp16 (layers the plan keeps in fp16), starting on
// a 16-byte boundary so the CUDA kernels can write it in place.
//
// Invariants:
//  (1) slices are in source order and do not overlap; packed_bytes is the end
//      of the last one (with its padding).
//  (2) A key format that does not fit the block (int4_channel needs
//      block_tokens % 32 == 0) falls back to `fallback_key` (int4_token when
//      head_dim % 32 == 0, else fp8_token); `fell_back` says so.
//  (3) KIVI's fp16 residual window does not apply: blocks are demoted old,
//      the newest tokens stay in HBM. Outlier channels are not kept here (the
//      per-channel int4 keys need none; see docs/compression.md).

#include "kernels/quant/precision_plan.hpp"
#include "kernels/quant/quant_format.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace kvtier::quant {

struct block_shape {
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t block_tokens = 0;
  uint32_t head_dim = 0;
};

struct slice_codec {
  uint32_t layer = 0;
  bool value = false;           // false = K, true = V
  std::optional<scheme> format; // nullopt = raw fp16
  tile_shape shape;             // kv_heads x block_tokens x head_dim
  uint64_t src_offset = 0;      // bytes into the fp16 block
  uint64_t dst_offset = 0;      // bytes into the packed block (16-aligned)
  uint64_t dst_bytes = 0;       // packed (or fp16) bytes of this slice, no padding
};

struct block_codec {
  std::vector<slice_codec> slices;
  uint64_t fp16_bytes = 0;
  uint64_t packed_bytes = 0;
  bool fell_back = false;
};

block_codec plan_block(const block_shape& shape, const precision_plan& plan);

/// CPU twin of the offload path. `src` holds codec.fp16_bytes, `dst` codec.packed_bytes.
void encode_block(const block_codec& codec, const uint16_t* src, uint8_t* dst);
void decode_block(const block_codec& codec, const uint8_t* src, uint16_t* dst);

} // namespace kvtier::quant
