// Batched quantize-on-offload kernels: one thread per 8 values of a row
// (Lanes = head_dim / 8 threads a row), rows of every selected slice of a
// chunk in one grid. Same arithmetic as quant_cpu.cpp, step by step.

#include "kernels/quant/offload_cuda.hpp"

#include "kernels/quant/quant_device.cuh"

#include <cuda_runtime.h>

namespace kvtier::quant::gpu {
namespace {

constexpr int threads = 256;

struct row_site {
  const uint4* raw_in; // this thread's 8 values in HBM
  uint4* raw_out;
  std::byte* packed; // the slice's packed tile in staging
  uint64_t r;        // row within the slice
  uint32_t lane;
  bool pad_writer; // zeroes the slice's padding
};

struct geometry {
  const uint2* pairs;
  bool hbm_is_from;
  uint32_t first_layer, layer_count, channels;
  uint64_t rows_per_slice, raw_bytes, packed_bytes, used_bytes, hbm_pitch;
  std::byte* hbm;
  std::byte* stage;
  uint64_t threads_total;
};

template <int Lanes>
__device__ __forceinline__ row_site locate(const geometry& g, uint64_t t) {
  uint64_t row = t / Lanes;
  uint64_t slice = row / g.rows_per_slice;
  uint64_t r = row % g.rows_per_slice;
  uint64_t i = slice / g.layer_count;
  uint64_t l = slice % g.layer_count;
  uint2 p = g.pairs[i];
  uint32_t hslot = g.hbm_is_from ? p.x : p.y;
  std::byte* raw = g.hbm + (g.first_layer + l) * g.hbm_pitch + hslot * g.raw_bytes + r * g.channels * 2;
  auto lane = static_cast<uint32_t>(t % Lanes);
  row_site s;
  s.raw_in = reinterpret_cast<const uint4*>(raw) + lane;
  s.raw_out = reinterpret_cast<uint4*>(raw) + lane;
  s.packed = g.stage + slice * g.packed_bytes;
  s.r = r;
  s.lane = lane;
  s.pad_writer = r == 0 && lane == 0;
  return s;
}

template <bool Bf16>
__device__ __forceinline__ void load8(const uint4* p, float* x) {
  if constexpr (Bf16)
    unpack8_bf16(*p, x);
  else
    unpack8(*p, x);
}
template <bool Bf16>
__device__ __forceinline__ void store8(uint4* p, float* x) {
  if constexpr (!Bf16) {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      x[i] = clamp_half(x[i]);
    *p = pack8(x);
  } else {
    *p = pack8_bf16(x);
  }
}

__device__ __forceinline__ void zero_padding(const geometry& g, std::byte* packed) {
  for (uint64_t b = g.used_bytes; b < g.packed_bytes; ++b)
    packed[b] = std::byte{0};
}

// fp8_token / int8_token.
template <bool Fp8, bool Bf16, int Lanes>
__global__ void encode_rows(geometry g) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  bool active = t < g.threads_total;
  float x[8];
  float amax = 0.0f;
  row_site s{};
  if (active) {
    s = locate<Lanes>(g, t);
    load8<Bf16>(s.raw_in, x);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      amax = fmaxf(amax, fabsf(x[i]));
  }
#pragma unroll
  for (int o = Lanes / 2; o > 0; o /= 2) // no shuffle at one lane a row
    amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o, Lanes));
  if (!active)
    return;
  uint16_t scale_h = f2h(__fdiv_rn(amax, Fp8 ? 448.0f : 127.0f));
  float inv = inverse(h2f(scale_h));
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    float y = __fmul_rn(x[i], inv);
    uint32_t c = Fp8 ? fp8_code(y) : int8_code(y);
    w[i / 4] |= c << (8 * (i % 4));
  }
  reinterpret_cast<uint2*>(s.packed + s.r * g.channels)[s.lane] = make_uint2(w[0], w[1]);
  if (s.lane == 0)
    reinterpret_cast<uint16_t*>(s.packed + g.rows_per_slice * g.channels)[s.r] = scale_h;
  if (s.pad_writer)
    zero_padding(g, s.packed);
}

template <bool Fp8, bool Bf16, int Lanes>
__global__ void decode_rows(geometry g) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= g.threads_total)
    return;
  row_site s = locate<Lanes>(g, t);
  float scale = h2f(reinterpret_cast<const uint16_t*>(s.packed + g.rows_per_slice * g.channels)[s.r]);
  uint2 c = reinterpret_cast<const uint2*>(s.packed + s.r * g.channels)[s.lane];
  const uint32_t w[2] = {c.x, c.y};
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    auto code = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
    float v = Fp8 ? fp8_value(code) : static_cast<float>(static_cast<int8_t>(code));
    x[i] = __fmul_rn(v, scale);
  }
  store8<Bf16>(s.raw_out, x);
}

// int4_token: a scale group is 32 values = 4 threads (Group = 4); int4_row:
// the row, Lanes threads (Group = Lanes).
template <bool Bf16, int Lanes, int Group>
__global__ void encode_int4(geometry g) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  bool active = t < g.threads_total;
  float x[8];
  float mn = 0.0f, mx = 0.0f;
  row_site s{};
  if (active) {
    s = locate<Lanes>(g, t);
    load8<Bf16>(s.raw_in, x);
    mn = mx = x[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) {
      mn = fminf(mn, x[i]);
      mx = fmaxf(mx, x[i]);
    }
  }
#pragma unroll
  for (int o = Group / 2; o > 0; o /= 2) { // no shuffle at one lane a row
    mn = fminf(mn, __shfl_xor_sync(0xFFFFFFFFu, mn, o, Group));
    mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, o, Group));
  }
  if (!active)
    return;
  mn = __fadd_rn(mn, 0.0f); // -0 becomes +0, as in the CPU twin
  mx = __fadd_rn(mx, 0.0f);
  uint16_t scale_h = f2h(__fdiv_rn(__fsub_rn(mx, mn), 15.0f));
  uint16_t zero_h = f2h(mn);
  float inv = inverse(h2f(scale_h));
  float zero = h2f(zero_h);
  uint32_t w = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w |= int4_code(x[i], zero, inv) << (4 * i);
  reinterpret_cast<uint32_t*>(s.packed + s.r * g.channels / 2)[s.lane] = w;
  if (s.lane % Group == 0) {
    auto* scales = reinterpret_cast<uint32_t*>(s.packed + g.rows_per_slice * g.channels / 2);
    scales[s.r * (Lanes / Group) + s.lane / Group] = uint32_t{scale_h} | (uint32_t{zero_h} << 16);
  }
  if (s.pad_writer)
    zero_padding(g, s.packed);
}

template <bool Bf16, int Lanes, int Group>
__global__ void decode_int4(geometry g) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= g.threads_total)
    return;
  row_site s = locate<Lanes>(g, t);
  const auto* scales = reinterpret_cast<const uint32_t*>(s.packed + g.rows_per_slice * g.channels / 2);
  uint32_t sz = scales[s.r * (Lanes / Group) + s.lane / Group];
  float scale = h2f(static_cast<uint16_t>(sz & 0xFFFFu));
  float zero = h2f(static_cast<uint16_t>(sz >> 16));
  uint32_t w = reinterpret_cast<const uint32_t*>(s.packed + s.r * g.channels / 2)[s.lane];
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    x[i] = __fadd_rn(__fmul_rn(static_cast<float>((w >> (4 * i)) & 0xFu), scale), zero);
  store8<Bf16>(s.raw_out, x);
}

geometry geometry_of(const offload_batch& b) {
  const auto& c = b.codec;
  geometry g{};
  g.pairs = static_cast<const uint2*>(static_cast<const void*>(b.pairs));
  g.hbm_is_from = b.hbm_is_from;
  g.first_layer = b.first_layer;
  g.layer_count = b.layer_count;
  g.channels = c.tile.channels;
  g.rows_per_slice = c.tile.rows();
  g.raw_bytes = c.raw_bytes();
  g.packed_bytes = c.packed_bytes();
  g.used_bytes = quant::packed_bytes(c.format, c.tile);
  g.hbm_pitch = uint64_t{b.hbm_slots} * c.raw_bytes();
  g.hbm = static_cast<std::byte*>(b.hbm);
  g.stage = static_cast<std::byte*>(b.stage);
  g.threads_total = uint64_t{b.pair_count} * b.layer_count * g.rows_per_slice * (c.tile.channels / 8);
  return g;
}

template <bool Encode, bool Bf16, int Lanes>
void launch_lanes(scheme f, const geometry& g, unsigned blocks, cudaStream_t stream) {
  if constexpr (Encode) {
    if (f == scheme::fp8_token)
      encode_rows<true, Bf16, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if (f == scheme::int8_token)
      encode_rows<false, Bf16, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if (f == scheme::int4_row)
      encode_int4<Bf16, Lanes, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if constexpr (Lanes >= 4)
      encode_int4<Bf16, Lanes, 4><<<blocks, threads, 0, stream>>>(g);
  } else {
    if (f == scheme::fp8_token)
      decode_rows<true, Bf16, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if (f == scheme::int8_token)
      decode_rows<false, Bf16, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if (f == scheme::int4_row)
      decode_int4<Bf16, Lanes, Lanes><<<blocks, threads, 0, stream>>>(g);
    else if constexpr (Lanes >= 4)
      decode_int4<Bf16, Lanes, 4><<<blocks, threads, 0, stream>>>(g);
  }
}

template <bool Encode, bool Bf16>
void launch_element(scheme f, const geometry& g, unsigned blocks, cudaStream_t stream) {
  switch (g.channels / 8) {
    case 1:
      return launch_lanes<Encode, Bf16, 1>(f, g, blocks, stream);
    case 2:
      return launch_lanes<Encode, Bf16, 2>(f, g, blocks, stream);
    case 4:
      return launch_lanes<Encode, Bf16, 4>(f, g, blocks, stream);
    case 8:
      return launch_lanes<Encode, Bf16, 8>(f, g, blocks, stream);
    case 16:
      return launch_lanes<Encode, Bf16, 16>(f, g, blocks, stream);
    default:
      return launch_lanes<Encode, Bf16, 32>(f, g, blocks, stream);
  }
}

template <bool Encode>
int launch(const offload_batch& b, void* stream) {
  geometry g = geometry_of(b);
  if (g.threads_total == 0)
    return 0;
  auto blocks = static_cast<unsigned>((g.threads_total + threads - 1) / threads);
  auto s = static_cast<cudaStream_t>(stream);
  if (b.codec.element == element_type::bf16)
    launch_element<Encode, true>(b.codec.format, g, blocks, s);
  else
    launch_element<Encode, false>(b.codec.format, g, blocks, s);
  return static_cast<int>(cudaGetLastError());
}

} // namespace

int encode_offload(const offload_batch& batch, void* stream) {
  return launch<true>(batch, stream);
}

int decode_offload(const offload_batch& batch, void* stream) {
  return launch<false>(batch, stream);
}

} // namespace kvtier::quant::gpu
