#pragma once
// bfloat16 <-> float in software: round to nearest even (as CUDA's
// __float2bfloat16_rn), NaN kept quiet. Weights and K/V are stored in bf16;
// arithmetic is float.

#include <cstdint>
#include <cstring>

namespace kvtier::model {

using bf16 = uint16_t;

inline float bf16_to_float(bf16 v) {
  uint32_t u = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<bf16>((u >> 16) | 0x40u); // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<bf16>(u >> 16);
}

} // namespace kvtier::model
