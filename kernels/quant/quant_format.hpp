#pragma once
// Quantized KV tile formats and their byte layouts (shared by the CPU twin and
// the CUDA kernels, so a tile quantized on one side dequantizes on the other).
//
// A tile is `slices` independent matrices of [tokens x channels] fp16 values,
// row-major (one row = one token's head_dim vector of one layer, one kv head,
// K or V). A packed tile is the payload followed by the scales:
//
//   fp8_token   payload: slices*tokens*channels e4m3 bytes.
//               scales:  one fp16 per row (slices*tokens), scale = amax / 448.
//   fp8_tensor  payload: as fp8_token.
//               scales:  one fp32 per slice, scale = amax(slice) / 448.
//   int8_token  payload: slices*tokens*channels int8 (symmetric, -127..127).
//               scales:  one fp16 per row, scale = amax / 127.
//   int4_token  (KIVI values) payload: two 4-bit codes per byte, element 2i in
//               the low nibble, 2i+1 in the high one, rows packed one after another.
//               scales:  per row, per group of 32 channels: fp16 scale then
//               fp16 zero (4 bytes); x = code * scale + zero, code in 0..15.
//   int4_row    payload: as int4_token.
//               scales:  one fp16 scale then fp16 zero per row (one group of
//               head_dim values): 4 bytes a row where int4_token spends 4 per
//               32 values, so 3.76x fewer bytes than fp16 at head_dim 128
//               where int4_token has 3.2x.
//   int4_channel (KIVI keys) payload: as int4_token.
//               scales:  per slice, per group of 32 tokens, per channel: fp16
//               scale then fp16 zero; groups run along tokens, one per channel.
//
// Invariants: channels is even; int4_token needs channels % 32 == 0;
// int4_channel needs tokens % 32 == 0 (KIVI keeps the remainder in fp16).
// For fp8_token, int8_token, int4_token and int4_row the byte count equals
// stored_bytes() of runtime/dtype.hpp, so `kvtier calc` and the tiers agree.

#include <cstdint>
#include <optional>
#include <string_view>

namespace kvtier::quant {

enum class scheme : uint8_t { fp8_token, fp8_tensor, int8_token, int4_token, int4_channel, int4_row };

/// The 16-bit float a tile's values are in (the model's KV pool is bf16).
/// The packed formats are the same for both; only loading and storing differ.
enum class element_type : uint8_t { fp16, bf16 };

inline constexpr uint32_t int4_group = 32; // elements per int4 scale group (KIVI uses 32)

struct tile_shape {
  uint32_t slices = 1;
  uint32_t tokens = 0;
  uint32_t channels = 0;

  uint64_t rows() const { return uint64_t{slices} * tokens; }
  uint64_t elements() const { return rows() * channels; }
};

std::string_view name_of(scheme s);
std::optional<scheme> parse_scheme(std::string_view text);

/// True if `shape` satisfies the format's invariants above.
bool fits(scheme s, const tile_shape& shape);
/// Bytes of codes. REQUIRES: fits(s, shape).
uint64_t payload_bytes(scheme s, const tile_shape& shape);
/// Bytes of scales (and zero points). REQUIRES: fits(s, shape).
uint64_t scale_bytes(scheme s, const tile_shape& shape);
/// payload_bytes + scale_bytes: the bytes that cross PCIe for this tile.
inline uint64_t packed_bytes(scheme s, const tile_shape& shape) {
  return payload_bytes(s, shape) + scale_bytes(s, shape);
}

} // namespace kvtier::quant
