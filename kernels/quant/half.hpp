#pragma once
// IEEE binary16 <-> binary32 conversion in software, bit-exact with CUDA's
// __float2half_rn / __half2float (round to nearest even, subnormals kept,
// overflow to infinity). Plain C++17: included by the CUDA twin's tests too.

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kvtier::quant {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F)
    return bits_float(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    // Subnormal or zero: mant * 2^-24, exact in float.
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_half_rn(float f) {
  uint32_t x = float_bits(f);
  auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7FFFFFFFu;
  if (ax > 0x7F800000u)
    return 0x7FFF;       // NaN: CUDA's canonical half NaN
  if (ax >= 0x477FF000u) // >= 65520 rounds to infinity
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (ax >= 0x38800000u) { // a normal half: >= 2^-14
    uint32_t mant = ax & 0x7FFFFFu;
    uint32_t h = (((ax >> 23) - 112u) << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
      ++h; // a carry into the exponent is the right answer
    return static_cast<uint16_t>(sign | h);
  }
  // Subnormal half: scaling by 2^24 is exact, nearbyint rounds to nearest even.
  float q = std::nearbyint(bits_float(ax) * 16777216.0f);
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
}

} // namespace kvtier::quant
