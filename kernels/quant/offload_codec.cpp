#include "kernels/quant/offload_codec.hpp"

#include "kernels/quant/quant_cpu.hpp"

#include <cstring>

namespace kvtier::quant {

std::optional<offload_codec> make_offload_codec(scheme format, element_type element, uint32_t kv_heads,
                                                uint32_t block_tokens, uint32_t head_dim, std::string* why) {
  auto refuse = [&](std::string text) -> std::optional<offload_codec> {
    if (why)
      *why = std::move(text);
    return std::nullopt;
  };
  if (format != scheme::fp8_token && format != scheme::int8_token && format != scheme::int4_token &&
      format != scheme::int4_row)
    return refuse(std::string{name_of(format)} +
                  " is not a per-row format (fp8_token, int8_token, int4_token or int4_row)");
  bool lanes_ok = head_dim % 8 == 0 && head_dim >= 8 && head_dim <= 256 && ((head_dim / 8) & (head_dim / 8 - 1)) == 0;
  if (!lanes_ok)
    return refuse("head_dim " + std::to_string(head_dim) + " is not a power of two from 8 to 256");
  offload_codec c{format, element, {2 * kv_heads, block_tokens, head_dim}};
  if (kv_heads == 0 || block_tokens == 0 || !fits(format, c.tile))
    return refuse(std::string{name_of(format)} + " does not fit " + std::to_string(kv_heads) + " kv heads x " +
                  std::to_string(block_tokens) + " tokens x head_dim " + std::to_string(head_dim));
  return c;
}

void encode_slice(const offload_codec& codec, const std::byte* raw, std::byte* packed) {
  uint64_t used = quant::packed_bytes(codec.format, codec.tile);
  quantize(codec.format, codec.tile, reinterpret_cast<const uint16_t*>(raw), reinterpret_cast<uint8_t*>(packed),
           codec.element);
  std::memset(packed + used, 0, codec.packed_bytes() - used);
}

void decode_slice(const offload_codec& codec, const std::byte* packed, std::byte* raw) {
  dequantize(codec.format, codec.tile, reinterpret_cast<const uint8_t*>(packed), reinterpret_cast<uint16_t*>(raw),
             codec.element);
}

} // namespace kvtier::quant
