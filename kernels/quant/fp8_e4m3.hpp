#pragma once
// FP8 E4M3 (the "FN" variant NVIDIA and OCP use): 1 sign, 4 exponent bits
// (bias 7), 3 mantissa bits, no infinities, NaN = S.1111.111, largest finite
// 448 (0x7E), smallest subnormal 2^-9.
//
// float_to_e4m3 rounds to nearest even and saturates (CUDA's
// __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)): finite values and
// infinities beyond 448 become +-448; NaN becomes 0x7F. Bit-exact with the
// hardware conversion (cvt.rn.satfinite.e4m3x2.f32) on sm_89 and later.

#include "kernels/quant/half.hpp"

#include <cstdint>

namespace kvtier::quant {

inline constexpr float e4m3_max = 448.0f;

inline uint8_t float_to_e4m3(float f) {
  uint32_t x = float_bits(f);
  auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u)
    return 0x7F;
  if (ax >= 0x3C800000u) {            // >= 2^-6: a normal e4m3 (or saturation)
    uint32_t exp = (ax >> 23) - 120u; // e4m3 exponent field
    if (exp > 15u)
      return static_cast<uint8_t>(sign | 0x7Eu);
    uint32_t mant = ax & 0x7FFFFFu;
    uint32_t q = (exp << 3) | (mant >> 20);
    uint32_t rem = mant & 0xFFFFFu;
    if (rem > 0x80000u || (rem == 0x80000u && (q & 1u)))
      ++q;
    if (q > 0x7Eu)
      q = 0x7Eu; // 0x7F would be NaN: saturate to 448
    return static_cast<uint8_t>(sign | q);
  }
  // Subnormal e4m3: multiples of 2^-9. Scaling by 2^9 is exact; 8 encodes 2^-6.
  float q = std::nearbyint(bits_float(ax) * 512.0f);
  return static_cast<uint8_t>(sign | static_cast<uint8_t>(q));
}

inline float e4m3_to_float(uint8_t v) {
  uint32_t exp = (v >> 3) & 0xFu;
  uint32_t mant = v & 0x7u;
  float mag;
  if ((v & 0x7Fu) == 0x7Fu)
    return bits_float(0x7FC00000u);
  if (exp == 0)
    mag = static_cast<float>(mant) * 0.001953125f; // 2^-9
  else
    mag = bits_float(((exp + 120u) << 23) | (mant << 20));
  return (v & 0x80u) ? -mag : mag;
}

} // namespace kvtier::quant
