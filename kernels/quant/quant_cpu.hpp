#pragma once
// The CPU twin of the quantization kernels: same formats (quant_format.hpp),
// same arithmetic, so its output is bit-for-bit what kernels/quant/quant_cuda.cu
// writes. Every step is one IEEE-rounded float operation in a fixed order:
//
//   scale  = half(amax / Q)              Q = 448 (fp8), 127 (int8)
//   inv    = scale == 0 ? 0 : 1 / float(scale)
//   code   = e4m3(x * inv) | clamp(rint(x * inv), -127, 127)
//   x^     = half(clamp(decode(code) * float(scale), -65504, 65504))
//   int4:    scale = half((max - min) / 15), zero = half(min),
//            code = clamp(rint((x - zero) * inv), 0, 15),
//            x^ = half(clamp(code * scale + zero, -65504, 65504))
//
// fp8_tensor keeps its scale in fp32 (not rounded to half).
// bf16 tiles: x = float(bf16) exactly; x^ = bf16_rn(decode(code) * scale)
// (no clamp: bf16 has float's range).
// Not thread-safe per call target; pure functions otherwise.

#include "kernels/quant/quant_format.hpp"

#include <cstdint>

namespace kvtier::quant {

/// Packs `shape` fp16 (or bf16) values into `out` (packed_bytes(s, shape) bytes: payload, then scales).
/// REQUIRES: fits(s, shape).
void quantize(scheme s, const tile_shape& shape, const uint16_t* in, uint8_t* out,
              element_type element = element_type::fp16);

/// Unpacks a tile written by quantize (CPU or CUDA) into fp16 (or bf16) values.
/// REQUIRES: fits(s, shape).
void dequantize(scheme s, const tile_shape& shape, const uint8_t* in, uint16_t* out,
                element_type element = element_type::fp16);

} // namespace kvtier::quant
