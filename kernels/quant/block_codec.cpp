#include "kernels/quant/block_codec.hpp"

#include "kernels/quant/quant_cpu.hpp"

#include <cstring>

namespace kvtier::quant {

block_codec plan_block(const block_shape& shape, const precision_plan& plan) {
  block_codec codec;
  tile_shape tile{shape.kv_heads, shape.block_tokens, shape.head_dim};
  uint64_t slice_fp16 = tile.elements() * 2;
  for (uint32_t layer = 0; layer < shape.layers; ++layer)
    for (bool value : {false, true}) {
      slice_codec s;
      s.layer = layer;
      s.value = value;
      s.format = value ? plan.value_scheme_for(layer, shape.layers) : plan.key_scheme_for(layer, shape.layers);
      if (s.format && !fits(*s.format, tile)) {
        scheme fallback = shape.head_dim % int4_group == 0 ? scheme::int4_token : scheme::fp8_token;
        s.format = fits(fallback, tile) ? std::optional<scheme>(fallback) : std::nullopt;
        codec.fell_back = true;
      }
      s.shape = tile;
      s.src_offset = codec.fp16_bytes;
      s.dst_offset = (codec.packed_bytes + 15) / 16 * 16;
      s.dst_bytes = s.format ? quant::packed_bytes(*s.format, tile) : slice_fp16;
      codec.fp16_bytes += slice_fp16;
      codec.packed_bytes = s.dst_offset + s.dst_bytes;
      codec.slices.push_back(s);
    }
  codec.packed_bytes = (codec.packed_bytes + 15) / 16 * 16;
  return codec;
}

void encode_block(const block_codec& codec, const uint16_t* src, uint8_t* dst) {
  std::memset(dst, 0, codec.packed_bytes); // padding is zero, so packed blocks compare equal
  for (const auto& s : codec.slices) {
    const uint16_t* in = src + s.src_offset / 2;
    if (s.format)
      quantize(*s.format, s.shape, in, dst + s.dst_offset);
    else
      std::memcpy(dst + s.dst_offset, in, s.dst_bytes);
  }
}

void decode_block(const block_codec& codec, const uint8_t* src, uint16_t* dst) {
  for (const auto& s : codec.slices) {
    uint16_t* out = dst + s.src_offset / 2;
    if (s.format)
      dequantize(*s.format, s.shape, src + s.dst_offset, out);
    else
      std::memcpy(out, src + s.dst_offset, s.dst_bytes);
  }
}

} // namespace kvtier::quant
