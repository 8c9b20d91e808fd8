#include "kernels/quant/quant_cpu.hpp"

#include "kernels/model/bf16.hpp"
#include "kernels/quant/fp8_e4m3.hpp"
#include "kernels/quant/half.hpp"
#include "runtime/check.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier::quant {
namespace {

float inverse(float scale) {
  return scale == 0.0f ? 0.0f : 1.0f / scale;
}

// The 16-bit element a tile holds. A dequantized fp16 value can land a
// rounding past fp16's largest finite value (e.g. 448 * half(65504 / 448) =
// 65520, which would round to infinity), so it is clamped first; bf16 has the
// range of float and needs no clamp.
struct fp16_element {
  static float load(uint16_t x) { return half_to_float(x); }
  static uint16_t store(float v) { return float_to_half_rn(std::min(65504.0f, std::max(-65504.0f, v))); }
};
struct bf16_element {
  static float load(uint16_t x) { return model::bf16_to_float(x); }
  static uint16_t store(float v) { return model::float_to_bf16(v); }
};

template <class E>
float row_amax(const uint16_t* x, uint32_t n) {
  float m = 0.0f;
  for (uint32_t i = 0; i < n; ++i)
    m = std::max(m, std::fabs(E::load(x[i])));
  return m;
}

uint8_t int8_code(float y) {
  float r = std::nearbyint(y);
  r = std::min(127.0f, std::max(-127.0f, r));
  return static_cast<uint8_t>(static_cast<int8_t>(r));
}

uint8_t int4_code(float x, float zero, float inv) {
  float r = std::nearbyint((x - zero) * inv);
  return static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, r)));
}

void put_nibble(uint8_t* payload, uint64_t index, uint8_t code) {
  uint8_t& b = payload[index / 2];
  b = (index & 1u) ? static_cast<uint8_t>((b & 0x0Fu) | (code << 4)) : static_cast<uint8_t>((b & 0xF0u) | code);
}

uint8_t get_nibble(const uint8_t* payload, uint64_t index) {
  return (index & 1u) ? static_cast<uint8_t>(payload[index / 2] >> 4)
                      : static_cast<uint8_t>(payload[index / 2] & 0x0Fu);
}

void put_half(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xFFu);
  p[1] = static_cast<uint8_t>(h >> 8);
}

uint16_t get_half(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Per-row symmetric formats: fp8_token and int8_token.
template <class E>
void quantize_rows(bool fp8, const tile_shape& shape, const uint16_t* in, uint8_t* out) {
  uint8_t* scales = out + shape.elements();
  const float q_max = fp8 ? e4m3_max : 127.0f;
  for (uint64_t r = 0; r < shape.rows(); ++r) {
    const uint16_t* x = in + r * shape.channels;
    uint16_t scale_h = float_to_half_rn(row_amax<E>(x, shape.channels) / q_max);
    float inv = inverse(half_to_float(scale_h));
    put_half(scales + 2 * r, scale_h);
    for (uint32_t c = 0; c < shape.channels; ++c) {
      float y = E::load(x[c]) * inv;
      out[r * shape.channels + c] = fp8 ? float_to_e4m3(y) : int8_code(y);
    }
  }
}

template <class E>
void dequantize_rows(bool fp8, const tile_shape& shape, const uint8_t* in, uint16_t* out) {
  const uint8_t* scales = in + shape.elements();
  for (uint64_t r = 0; r < shape.rows(); ++r) {
    float scale = half_to_float(get_half(scales + 2 * r));
    for (uint32_t c = 0; c < shape.channels; ++c) {
      uint8_t code = in[r * shape.channels + c];
      float v = fp8 ? e4m3_to_float(code) : static_cast<float>(static_cast<int8_t>(code));
      out[r * shape.channels + c] = E::store(v * scale);
    }
  }
}

template <class E>
void quantize_tensor(const tile_shape& shape, const uint16_t* in, uint8_t* out) {
  uint64_t per_slice = uint64_t{shape.tokens} * shape.channels;
  uint8_t* scales = out + shape.elements();
  for (uint32_t s = 0; s < shape.slices; ++s) {
    const uint16_t* x = in + s * per_slice;
    float scale = 0.0f;
    for (uint64_t i = 0; i < per_slice; ++i)
      scale = std::max(scale, std::fabs(E::load(x[i])));
    scale = scale / e4m3_max;
    float inv = inverse(scale);
    uint32_t bits = float_bits(scale);
    for (int b = 0; b < 4; ++b)
      scales[4 * s + b] = static_cast<uint8_t>(bits >> (8 * b));
    for (uint64_t i = 0; i < per_slice; ++i)
      out[s * per_slice + i] = float_to_e4m3(E::load(x[i]) * inv);
  }
}

template <class E>
void dequantize_tensor(const tile_shape& shape, const uint8_t* in, uint16_t* out) {
  uint64_t per_slice = uint64_t{shape.tokens} * shape.channels;
  const uint8_t* scales = in + shape.elements();
  for (uint32_t s = 0; s < shape.slices; ++s) {
    uint32_t bits = 0;
    for (int b = 0; b < 4; ++b)
      bits |= uint32_t{scales[4 * s + b]} << (8 * b);
    float scale = bits_float(bits);
    for (uint64_t i = 0; i < per_slice; ++i)
      out[s * per_slice + i] = E::store(e4m3_to_float(in[s * per_slice + i]) * scale);
  }
}

// One asymmetric int4 group: `n` values at stride `stride` (in elements).
template <class E>
void quantize_group(const uint16_t* in, uint64_t first, uint64_t stride, uint32_t n, uint8_t* payload,
                    uint8_t* scale_out) {
  float mn = E::load(in[first]);
  float mx = mn;
  for (uint32_t i = 1; i < n; ++i) {
    float v = E::load(in[first + i * stride]);
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  mn = mn + 0.0f; // -0 becomes +0, as on the GPU, whatever order the min ran in
  mx = mx + 0.0f;
  uint16_t scale_h = float_to_half_rn((mx - mn) / 15.0f);
  uint16_t zero_h = float_to_half_rn(mn);
  float inv = inverse(half_to_float(scale_h));
  float zero = half_to_float(zero_h);
  put_half(scale_out, scale_h);
  put_half(scale_out + 2, zero_h);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t idx = first + i * stride;
    put_nibble(payload, idx, int4_code(E::load(in[idx]), zero, inv));
  }
}

template <class E>
void dequantize_group(const uint8_t* payload, uint64_t first, uint64_t stride, uint32_t n, const uint8_t* scale_in,
                      uint16_t* out) {
  float scale = half_to_float(get_half(scale_in));
  float zero = half_to_float(get_half(scale_in + 2));
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t idx = first + i * stride;
    float code = static_cast<float>(get_nibble(payload, idx));
    out[idx] = E::store(code * scale + zero);
  }
}

template <class E>
void quantize_as(scheme s, const tile_shape& shape, const uint16_t* in, uint8_t* out) {
  KVTIER_CHECK(fits(s, shape), "quantize: shape does not fit the scheme");
  const uint32_t ch = shape.channels;
  switch (s) {
    case scheme::fp8_token:
      return quantize_rows<E>(true, shape, in, out);
    case scheme::int8_token:
      return quantize_rows<E>(false, shape, in, out);
    case scheme::fp8_tensor:
      return quantize_tensor<E>(shape, in, out);
    case scheme::int4_token: {
      uint8_t* scales = out + payload_bytes(s, shape);
      uint32_t groups = ch / int4_group;
      for (uint64_t r = 0; r < shape.rows(); ++r)
        for (uint32_t g = 0; g < groups; ++g)
          quantize_group<E>(in, r * ch + g * int4_group, 1, int4_group, out, scales + 4 * (r * groups + g));
      return;
    }
    case scheme::int4_row: {
      uint8_t* scales = out + payload_bytes(s, shape);
      for (uint64_t r = 0; r < shape.rows(); ++r)
        quantize_group<E>(in, r * ch, 1, ch, out, scales + 4 * r);
      return;
    }
    case scheme::int4_channel: {
      uint8_t* scales = out + payload_bytes(s, shape);
      uint32_t groups = shape.tokens / int4_group;
      for (uint32_t sl = 0; sl < shape.slices; ++sl)
        for (uint32_t g = 0; g < groups; ++g)
          for (uint32_t c = 0; c < ch; ++c) {
            uint64_t first = (uint64_t{sl} * shape.tokens + uint64_t{g} * int4_group) * ch + c;
            quantize_group<E>(in, first, ch, int4_group, out, scales + 4 * ((uint64_t{sl} * groups + g) * ch + c));
          }
      return;
    }
  }
}

template <class E>
void dequantize_as(scheme s, const tile_shape& shape, const uint8_t* in, uint16_t* out) {
  KVTIER_CHECK(fits(s, shape), "dequantize: shape does not fit the scheme");
  const uint32_t ch = shape.channels;
  switch (s) {
    case scheme::fp8_token:
      return dequantize_rows<E>(true, shape, in, out);
    case scheme::int8_token:
      return dequantize_rows<E>(false, shape, in, out);
    case scheme::fp8_tensor:
      return dequantize_tensor<E>(shape, in, out);
    case scheme::int4_token: {
      const uint8_t* scales = in + payload_bytes(s, shape);
      uint32_t groups = ch / int4_group;
      for (uint64_t r = 0; r < shape.rows(); ++r)
        for (uint32_t g = 0; g < groups; ++g)
          dequantize_group<E>(in, r * ch + g * int4_group, 1, int4_group, scales + 4 * (r * groups + g), out);
      return;
    }
    case scheme::int4_row: {
      const uint8_t* scales = in + payload_bytes(s, shape);
      for (uint64_t r = 0; r < shape.rows(); ++r)
        dequantize_group<E>(in, r * ch, 1, ch, scales + 4 * r, out);
      return;
    }
    case scheme::int4_channel: {
      const uint8_t* scales = in + payload_bytes(s, shape);
      uint32_t groups = shape.tokens / int4_group;
      for (uint32_t sl = 0; sl < shape.slices; ++sl)
        for (uint32_t g = 0; g < groups; ++g)
          for (uint32_t c = 0; c < ch; ++c) {
            uint64_t first = (uint64_t{sl} * shape.tokens + uint64_t{g} * int4_group) * ch + c;
            dequantize_group<E>(in, first, ch, int4_group, scales + 4 * ((uint64_t{sl} * groups + g) * ch + c), out);
          }
      return;
    }
  }
}

} // namespace

void quantize(scheme s, const tile_shape& shape, const uint16_t* in, uint8_t* out, element_type element) {
  if (element == element_type::bf16)
    return quantize_as<bf16_element>(s, shape, in, out);
  quantize_as<fp16_element>(s, shape, in, out);
}

void dequantize(scheme s, const tile_shape& shape, const uint8_t* in, uint16_t* out, element_type element) {
  if (element == element_type::bf16)
    return dequantize_as<bf16_element>(s, shape, in, out);
  dequantize_as<fp16_element>(s, shape, in, out);
}

} // namespace kvtier::quant
