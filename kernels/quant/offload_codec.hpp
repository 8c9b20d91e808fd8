#pragma once
// Quantize-on-offload for the copy engine: what one block's slice of one
// layer becomes when it leaves HBM, so fewer bytes cross PCIe and land in
// DRAM and on NVMe.
//
// A slice in HBM is K then V, each [kv_heads][block_tokens][head_dim] of
// 16-bit floats (kernels/model/paged_kv.hpp): as a tile, `2 * kv_heads *
// block_tokens` independent rows of head_dim values. Below HBM it is the
// packed tile of a per-row format (quant_format.hpp: fp8_token, int8_token,
// int4_token or int4_row; per-row scales need no neighbouring block), padded to 16
// bytes so packed slices stay aligned for the CUDA kernels and DMA.
//
// Invariants: raw_bytes() is the HBM slice size; packed_bytes() <
// raw_bytes(), a multiple of 16; encode then decode is the tile round trip of
// quant_cpu.hpp (lossy, deterministic, bit-equal to the CUDA twin).

#include "kernels/quant/quant_format.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtier::quant {

struct offload_codec {
  scheme format = scheme::fp8_token;
  element_type element = element_type::bf16;
  tile_shape tile; // slices = 2 * kv_heads, tokens = block_tokens, channels = head_dim

  uint64_t raw_bytes() const { return tile.elements() * 2; }
  uint64_t packed_bytes() const { return (quant::packed_bytes(format, tile) + 15) / 16 * 16; }
};

/// The codec for a KV slice of this geometry in `format`, or why it cannot
/// be used (format not per-row, head_dim not a power of two in 8..256,
/// int4 with head_dim % 32 != 0).
std::optional<offload_codec> make_offload_codec(scheme format, element_type element, uint32_t kv_heads,
                                                uint32_t block_tokens, uint32_t head_dim, std::string* why);

/// CPU twin: `raw` holds raw_bytes(), `packed` packed_bytes() (its padding zeroed).
void encode_slice(const offload_codec& codec, const std::byte* raw, std::byte* packed);
void decode_slice(const offload_codec& codec, const std::byte* packed, std::byte* raw);

} // namespace kvtier::quant
