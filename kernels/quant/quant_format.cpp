#include "kernels/quant/quant_format.hpp"

#include "runtime/check.hpp"

namespace kvtier::quant {

std::string_view name_of(scheme s) {
  switch (s) {
    case scheme::fp8_token:
      return "fp8_token";
    case scheme::fp8_tensor:
      return "fp8_tensor";
    case scheme::int8_token:
      return "int8_token";
    case scheme::int4_token:
      return "int4_token";
    case scheme::int4_channel:
      return "int4_channel";
    case scheme::int4_row:
      return "int4_row";
  }
  return "?";
}

std::optional<scheme> parse_scheme(std::string_view text) {
  for (auto s : {scheme::fp8_token, scheme::fp8_tensor, scheme::int8_token, scheme::int4_token, scheme::int4_channel,
                 scheme::int4_row})
    if (name_of(s) == text)
      return s;
  return std::nullopt;
}

bool fits(scheme s, const tile_shape& shape) {
  if (shape.channels == 0 || shape.channels % 2 != 0 || shape.tokens == 0 || shape.slices == 0)
    return false;
  if (s == scheme::int4_token)
    return shape.channels % int4_group == 0;
  if (s == scheme::int4_channel)
    return shape.tokens % int4_group == 0;
  return true;
}

uint64_t payload_bytes(scheme s, const tile_shape& shape) {
  KVTIER_CHECK(fits(s, shape), "payload_bytes: shape does not fit the scheme");
  bool nibbles = s == scheme::int4_token || s == scheme::int4_channel || s == scheme::int4_row;
  return nibbles ? shape.elements() / 2 : shape.elements();
}

uint64_t scale_bytes(scheme s, const tile_shape& shape) {
  KVTIER_CHECK(fits(s, shape), "scale_bytes: shape does not fit the scheme");
  switch (s) {
    case scheme::fp8_token:
    case scheme::int8_token:
      return shape.rows() * 2;
    case scheme::fp8_tensor:
      return uint64_t{shape.slices} * 4;
    case scheme::int4_token:
      return shape.rows() * (shape.channels / int4_group) * 4;
    case scheme::int4_channel:
      return uint64_t{shape.slices} * (shape.tokens / int4_group) * shape.channels * 4;
    case scheme::int4_row:
      return shape.rows() * 4;
  }
  return 0;
}

} // namespace kvtier::quant
