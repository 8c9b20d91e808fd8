#pragma once
// Device helpers shared by the quantization kernels (quant_cuda.cu,
// offload_cuda.cu): conversions and codes with explicitly rounded float
// steps, so the bytes equal the CPU twin's (quant_cpu.cpp).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace kvtier::quant::gpu {
namespace {

__device__ __forceinline__ float h2f(uint16_t h) {
  return __half2float(__ushort_as_half(h));
}
__device__ __forceinline__ uint16_t f2h(float f) {
  return __half_as_ushort(__float2half_rn(f));
}
// Dequantized values are clamped to fp16's finite range first, as in the CPU twin.
__device__ __forceinline__ float clamp_half(float f) {
  return fminf(65504.0f, fmaxf(-65504.0f, f));
}
__device__ __forceinline__ float inverse(float s) {
  return s == 0.0f ? 0.0f : __frcp_rn(s);
}

__device__ __forceinline__ uint8_t fp8_code(float y) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(y, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ float fp8_value(uint8_t c) {
  __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
  return __half2float(__half(h));
}
__device__ __forceinline__ uint8_t int8_code(float y) {
  int r = __float2int_rn(y);
  r = min(127, max(-127, r));
  return static_cast<uint8_t>(static_cast<int8_t>(r));
}
__device__ __forceinline__ uint32_t int4_code(float x, float zero, float inv) {
  int r = __float2int_rn(__fmul_rn(__fsub_rn(x, zero), inv));
  return static_cast<uint32_t>(min(15, max(0, r)));
}

__device__ __forceinline__ void unpack8(const uint4& v, float* x) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = h2f(static_cast<uint16_t>(w[i] & 0xFFFFu));
    x[2 * i + 1] = h2f(static_cast<uint16_t>(w[i] >> 16));
  }
}
__device__ __forceinline__ uint4 pack8(const float* x) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = uint32_t{f2h(x[2 * i])} | (uint32_t{f2h(x[2 * i + 1])} << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// bf16 <-> float: widening is exact; narrowing rounds to nearest even.
__device__ __forceinline__ void unpack8_bf16(const uint4& v, float* x) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    x[2 * i] = __uint_as_float(w[i] << 16);
    x[2 * i + 1] = __uint_as_float(w[i] & 0xFFFF0000u);
  }
}
__device__ __forceinline__ uint16_t f2bf(float f) {
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
__device__ __forceinline__ uint4 pack8_bf16(const float* x) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
    w[i] = uint32_t{f2bf(x[2 * i])} | (uint32_t{f2bf(x[2 * i + 1])} << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

} // namespace
} // namespace kvtier::quant::gpu
