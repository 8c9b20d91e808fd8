// CUDA twin of quant_cpu.cpp. Every float step uses an explicitly rounded
// intrinsic (__fmul_rn, __fadd_rn, __fdiv_rn, __frcp_rn) so nvcc cannot fuse
// it into an FMA, and the bytes equal the CPU twin's.
// C++17, no CAF: compiled by nvcc only when the build has CUDA.

#include "kernels/quant/quant_cuda.hpp"

#include "kernels/quant/quant_device.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

namespace kvtier::quant::gpu {
namespace {

constexpr int threads = 256;

// fp8_token / int8_token: LANES threads per row, 8 elements (16 bytes) each.
template <bool Fp8, int Lanes>
__global__ void quantize_rows(const uint4* __restrict__ in, uint2* __restrict__ codes, uint16_t* __restrict__ scales,
                              uint64_t rows) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  uint64_t row = t / Lanes;
  bool active = row < rows;
  float x[8];
  float amax = 0.0f;
  if (active) {
    unpack8(in[t], x);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      amax = fmaxf(amax, fabsf(x[i]));
  }
#pragma unroll
  for (int o = Lanes / 2; o > 0; o /= 2)
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
  codes[t] = make_uint2(w[0], w[1]);
  if (t % Lanes == 0)
    scales[row] = scale_h;
}

template <bool Fp8, int Lanes>
__global__ void dequantize_rows(const uint2* __restrict__ codes, const uint16_t* __restrict__ scales,
                                uint4* __restrict__ out, uint64_t rows) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  uint64_t row = t / Lanes;
  if (row >= rows)
    return;
  float scale = h2f(scales[row]);
  uint2 c = codes[t];
  const uint32_t w[2] = {c.x, c.y};
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    auto code = static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)));
    float v = Fp8 ? fp8_value(code) : static_cast<float>(static_cast<int8_t>(code));
    x[i] = clamp_half(__fmul_rn(v, scale));
  }
  out[t] = pack8(x);
}

// fp8_tensor: amax per slice (atomicMax on the bits of a non-negative float),
// then quantize with scale = amax / 448 kept in fp32, then store the scale.
__global__ void slice_amax(const uint4* __restrict__ in, uint32_t* __restrict__ amax_bits, uint64_t chunks_per_slice) {
  uint64_t slice = blockIdx.y;
  float m = 0.0f;
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < chunks_per_slice;
       i += uint64_t{gridDim.x} * blockDim.x) {
    float x[8];
    unpack8(in[slice * chunks_per_slice + i], x);
#pragma unroll
    for (int k = 0; k < 8; ++k)
      m = fmaxf(m, fabsf(x[k]));
  }
  for (int o = 16; o > 0; o /= 2)
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
  if (threadIdx.x % 32 == 0)
    atomicMax(amax_bits + slice, __float_as_uint(m));
}

__global__ void quantize_tensor(const uint4* __restrict__ in, const uint32_t* __restrict__ amax_bits,
                                uint2* __restrict__ codes, uint64_t chunks_per_slice, uint64_t chunks) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= chunks)
    return;
  float inv = inverse(__fdiv_rn(__uint_as_float(amax_bits[t / chunks_per_slice]), 448.0f));
  float x[8];
  unpack8(in[t], x);
  uint32_t w[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w[i / 4] |= uint32_t{fp8_code(__fmul_rn(x[i], inv))} << (8 * (i % 4));
  codes[t] = make_uint2(w[0], w[1]);
}

__global__ void amax_to_scale(uint32_t* bits, uint32_t slices) {
  uint32_t s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s < slices)
    bits[s] = __float_as_uint(__fdiv_rn(__uint_as_float(bits[s]), 448.0f));
}

__global__ void dequantize_tensor(const uint2* __restrict__ codes, const float* __restrict__ scales,
                                  uint4* __restrict__ out, uint64_t chunks_per_slice, uint64_t chunks) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= chunks)
    return;
  float scale = scales[t / chunks_per_slice];
  uint2 c = codes[t];
  const uint32_t w[2] = {c.x, c.y};
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    x[i] = clamp_half(__fmul_rn(fp8_value(static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)))), scale));
  out[t] = pack8(x);
}

// int4_token: a group is 32 consecutive elements = 4 threads of 8 (Group = 4);
// int4_row: a group is the whole row, channels / 8 threads (Group = lanes).
template <int Group>
__global__ void quantize_int4_token(const uint4* __restrict__ in, uint32_t* __restrict__ codes,
                                    uint32_t* __restrict__ scales, uint64_t chunks) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  bool active = t < chunks;
  float x[8];
  float mn = 0.0f, mx = 0.0f;
  if (active) {
    unpack8(in[t], x);
    mn = mx = x[0];
#pragma unroll
    for (int i = 1; i < 8; ++i) {
      mn = fminf(mn, x[i]);
      mx = fmaxf(mx, x[i]);
    }
  }
#pragma unroll
  for (int o = Group / 2; o > 0; o /= 2) {
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
  codes[t] = w;
  if (t % Group == 0)
    scales[t / Group] = uint32_t{scale_h} | (uint32_t{zero_h} << 16);
}

template <int Group>
__global__ void dequantize_int4_token(const uint32_t* __restrict__ codes, const uint32_t* __restrict__ scales,
                                      uint4* __restrict__ out, uint64_t chunks) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= chunks)
    return;
  uint32_t sz = scales[t / Group];
  float scale = h2f(static_cast<uint16_t>(sz & 0xFFFFu));
  float zero = h2f(static_cast<uint16_t>(sz >> 16));
  uint32_t w = codes[t];
  float x[8];
#pragma unroll
  for (int i = 0; i < 8; ++i)
    x[i] = clamp_half(__fadd_rn(__fmul_rn(static_cast<float>((w >> (4 * i)) & 0xFu), scale), zero));
  out[t] = pack8(x);
}

// int4_channel: one thread = 8 adjacent channels over one group of 32 tokens.
// The 32 rows stay in registers (32 x 16 bytes, all loads in flight at once),
// so the tile is read from memory once.
__global__ void __launch_bounds__(threads)
    quantize_int4_channel(const uint4* __restrict__ in, uint32_t* __restrict__ codes, uint4* __restrict__ scales,
                          uint32_t chunks_per_row, uint64_t work) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= work)
    return;
  uint64_t tile = t / chunks_per_row; // (slice, group) in order
  uint32_t col = static_cast<uint32_t>(t % chunks_per_row);
  uint64_t base = tile * 32 * chunks_per_row + col;
  uint4 raw[32];
#pragma unroll
  for (int r = 0; r < 32; ++r)
    raw[r] = in[base + static_cast<uint64_t>(r) * chunks_per_row];
  float mn[8], mx[8], x[8];
  unpack8(raw[0], mn);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    mx[i] = mn[i];
#pragma unroll
  for (int r = 1; r < 32; ++r) {
    unpack8(raw[r], x);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      mn[i] = fminf(mn[i], x[i]);
      mx[i] = fmaxf(mx[i], x[i]);
    }
  }
  float zero[8], inv[8];
  uint32_t sz[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    mn[i] = __fadd_rn(mn[i], 0.0f); // -0 becomes +0, as in the CPU twin
    mx[i] = __fadd_rn(mx[i], 0.0f);
    uint16_t scale_h = f2h(__fdiv_rn(__fsub_rn(mx[i], mn[i]), 15.0f));
    uint16_t zero_h = f2h(mn[i]);
    inv[i] = inverse(h2f(scale_h));
    zero[i] = h2f(zero_h);
    sz[i] = uint32_t{scale_h} | (uint32_t{zero_h} << 16);
  }
  scales[2 * t] = make_uint4(sz[0], sz[1], sz[2], sz[3]);
  scales[2 * t + 1] = make_uint4(sz[4], sz[5], sz[6], sz[7]);
#pragma unroll
  for (int r = 0; r < 32; ++r) {
    unpack8(raw[r], x);
    uint32_t w = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i)
      w |= int4_code(x[i], zero[i], inv[i]) << (4 * i);
    codes[base + static_cast<uint64_t>(r) * chunks_per_row] = w;
  }
}

__global__ void dequantize_int4_channel(const uint32_t* __restrict__ codes, const uint4* __restrict__ scales,
                                        uint4* __restrict__ out, uint32_t chunks_per_row, uint64_t work) {
  uint64_t t = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (t >= work)
    return;
  uint64_t tile = t / chunks_per_row;
  uint32_t col = static_cast<uint32_t>(t % chunks_per_row);
  uint64_t base = tile * 32 * chunks_per_row + col;
  uint4 a = scales[2 * t], b = scales[2 * t + 1];
  const uint32_t sz[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  float scale[8], zero[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    scale[i] = h2f(static_cast<uint16_t>(sz[i] & 0xFFFFu));
    zero[i] = h2f(static_cast<uint16_t>(sz[i] >> 16));
  }
  for (int r = 0; r < 32; ++r) {
    uint32_t w = codes[base + static_cast<uint64_t>(r) * chunks_per_row];
    float x[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      x[i] = clamp_half(__fadd_rn(__fmul_rn(static_cast<float>((w >> (4 * i)) & 0xFu), scale[i]), zero[i]));
    out[base + static_cast<uint64_t>(r) * chunks_per_row] = pack8(x);
  }
}

unsigned blocks_for(uint64_t work) {
  return static_cast<unsigned>((work + threads - 1) / threads);
}

template <bool Fp8>
int launch_rows(bool quant, const tile_shape& shape, const void* in, void* out, cudaStream_t st) {
  uint32_t lanes = shape.channels / 8;
  uint64_t work = shape.rows() * lanes;
  auto g = blocks_for(work);
  auto run = [&](auto lanes_tag) {
    constexpr int L = decltype(lanes_tag)::value;
    if (quant)
      quantize_rows<Fp8, L><<<g, threads, 0, st>>>(
          static_cast<const uint4*>(in), static_cast<uint2*>(out),
          reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(out) + shape.elements()), shape.rows());
    else
      dequantize_rows<Fp8, L>
          <<<g, threads, 0, st>>>(static_cast<const uint2*>(in),
                                  reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(in) + shape.elements()),
                                  static_cast<uint4*>(out), shape.rows());
  };
  switch (lanes) {
    case 2:
      run(std::integral_constant<int, 2>{});
      break;
    case 4:
      run(std::integral_constant<int, 4>{});
      break;
    case 8:
      run(std::integral_constant<int, 8>{});
      break;
    case 16:
      run(std::integral_constant<int, 16>{});
      break;
    case 32:
      run(std::integral_constant<int, 32>{});
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <int Group>
int launch_int4(bool quant, uint64_t chunks, uint64_t payload, const void* in, void* out, cudaStream_t st) {
  if (quant)
    quantize_int4_token<Group><<<blocks_for(chunks), threads, 0, st>>>(
        static_cast<const uint4*>(in), static_cast<uint32_t*>(out),
        reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(out) + payload), chunks);
  else
    dequantize_int4_token<Group><<<blocks_for(chunks), threads, 0, st>>>(
        static_cast<const uint32_t*>(in), reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(in) + payload),
        static_cast<uint4*>(out), chunks);
  return cudaGetLastError();
}

bool aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

int launch(bool quant, scheme s, const tile_shape& shape, const void* in, void* out, void* stream) {
  if (!supports(s, shape) || !aligned(in) || !aligned(out))
    return cudaErrorInvalidValue;
  auto st = static_cast<cudaStream_t>(stream);
  uint64_t chunks = shape.elements() / 8;
  uint64_t payload = payload_bytes(s, shape);
  switch (s) {
    case scheme::fp8_token:
      return launch_rows<true>(quant, shape, in, out, st);
    case scheme::int8_token:
      return launch_rows<false>(quant, shape, in, out, st);
    case scheme::fp8_tensor: {
      uint64_t per_slice = chunks / shape.slices;
      if (quant) {
        auto* bits = reinterpret_cast<uint32_t*>(static_cast<uint8_t*>(out) + payload);
        if (auto e = cudaMemsetAsync(bits, 0, 4ull * shape.slices, st))
          return e;
        unsigned gx = static_cast<unsigned>(std::min<uint64_t>(blocks_for(per_slice), 64));
        slice_amax<<<dim3(gx, shape.slices), threads, 0, st>>>(static_cast<const uint4*>(in), bits, per_slice);
        quantize_tensor<<<blocks_for(chunks), threads, 0, st>>>(static_cast<const uint4*>(in), bits,
                                                                static_cast<uint2*>(out), per_slice, chunks);
        amax_to_scale<<<(shape.slices + threads - 1) / threads, threads, 0, st>>>(bits, shape.slices);
      } else {
        auto* scales = reinterpret_cast<const float*>(static_cast<const uint8_t*>(in) + payload);
        dequantize_tensor<<<blocks_for(chunks), threads, 0, st>>>(static_cast<const uint2*>(in), scales,
                                                                  static_cast<uint4*>(out), per_slice, chunks);
      }
      return cudaGetLastError();
    }
    case scheme::int4_token:
      return launch_int4<4>(quant, chunks, payload, in, out, st);
    case scheme::int4_row:
      switch (shape.channels / 8) {
        case 2:
          return launch_int4<2>(quant, chunks, payload, in, out, st);
        case 4:
          return launch_int4<4>(quant, chunks, payload, in, out, st);
        case 8:
          return launch_int4<8>(quant, chunks, payload, in, out, st);
        case 16:
          return launch_int4<16>(quant, chunks, payload, in, out, st);
        case 32:
          return launch_int4<32>(quant, chunks, payload, in, out, st);
        default:
          return cudaErrorInvalidValue;
      }
    case scheme::int4_channel: {
      uint32_t per_row = shape.channels / 8;
      uint64_t work = chunks / 32;
      if (quant)
        quantize_int4_channel<<<blocks_for(work), threads, 0, st>>>(
            static_cast<const uint4*>(in), static_cast<uint32_t*>(out),
            reinterpret_cast<uint4*>(static_cast<uint8_t*>(out) + payload), per_row, work);
      else
        dequantize_int4_channel<<<blocks_for(work), threads, 0, st>>>(
            static_cast<const uint32_t*>(in), reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(in) + payload),
            static_cast<uint4*>(out), per_row, work);
      return cudaGetLastError();
    }
  }
  return cudaErrorInvalidValue;
}

std::string describe(int code, const char* what) {
  return std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(code));
}

} // namespace

bool available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return n > 0;
}

bool supports(scheme s, const tile_shape& shape) {
  if (!fits(s, shape) || shape.channels % 8 != 0 || payload_bytes(s, shape) % 16 != 0)
    return false;
  if (s == scheme::fp8_tensor && shape.slices > 65535)
    return false; // one grid row per slice for the amax pass
  if (s == scheme::fp8_token || s == scheme::int8_token || s == scheme::int4_row) {
    uint32_t lanes = shape.channels / 8;
    return lanes >= 2 && lanes <= 32 && (lanes & (lanes - 1)) == 0;
  }
  return true;
}

int quantize(scheme s, const tile_shape& shape, const void* in, void* out, void* stream) {
  return launch(true, s, shape, in, out, stream);
}

int dequantize(scheme s, const tile_shape& shape, const void* in, void* out, void* stream) {
  return launch(false, s, shape, in, out, stream);
}

int round_trip_host(scheme s, const tile_shape& shape, const uint16_t* in, uint8_t* packed, uint16_t* out,
                    std::string* error) {
  uint64_t in_bytes = shape.elements() * 2;
  uint64_t p_bytes = packed_bytes(s, shape);
  void *d_in = nullptr, *d_packed = nullptr, *d_out = nullptr;
  int rc = 0;
  auto step = [&](int code, const char* what) {
    if (rc == 0 && code != 0) {
      rc = code;
      if (error)
        *error = describe(code, what);
    }
  };
  step(cudaMalloc(&d_in, in_bytes), "cudaMalloc");
  step(cudaMalloc(&d_packed, p_bytes), "cudaMalloc");
  step(cudaMalloc(&d_out, in_bytes), "cudaMalloc");
  if (rc == 0) {
    step(cudaMemset(d_packed, 0xA5, p_bytes), "cudaMemset"); // poison: every byte must be written
    step(cudaMemset(d_out, 0xA5, in_bytes), "cudaMemset");
    step(cudaMemcpy(d_in, in, in_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    step(quantize(s, shape, d_in, d_packed, nullptr), "quantize");
    step(dequantize(s, shape, d_packed, d_out, nullptr), "dequantize");
    step(cudaDeviceSynchronize(), "kernels");
    step(cudaMemcpy(packed, d_packed, p_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    step(cudaMemcpy(out, d_out, in_bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  }
  cudaFree(d_in);
  cudaFree(d_packed);
  cudaFree(d_out);
  return rc;
}

__global__ void fill_random_half(uint16_t* x, uint64_t n, uint64_t seed) {
  for (uint64_t i = uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += uint64_t{gridDim.x} * blockDim.x) {
    uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f); // [0, 1)
    x[i] = f2h((u - 0.5f) * 8.0f);
  }
}

int time_kernels(scheme s, const tile_shape& shape, int reps, timing* result, std::string* error) {
  if (!supports(s, shape)) {
    if (error)
      *error = "shape not supported on the GPU";
    return cudaErrorInvalidValue;
  }
  uint64_t in_bytes = shape.elements() * 2;
  uint64_t p_bytes = packed_bytes(s, shape);
  void *d_in = nullptr, *d_packed = nullptr, *d_out = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  int rc = 0;
  auto step = [&](int code, const char* what) {
    if (rc == 0 && code != 0) {
      rc = code;
      if (error)
        *error = describe(code, what);
    }
  };
  cudaDeviceProp prop{};
  step(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  if (rc == 0)
    result->device = prop.name;
  step(cudaMalloc(&d_in, in_bytes), "cudaMalloc");
  step(cudaMalloc(&d_packed, p_bytes), "cudaMalloc");
  step(cudaMalloc(&d_out, in_bytes), "cudaMalloc");
  step(cudaEventCreate(&a), "cudaEventCreate");
  step(cudaEventCreate(&b), "cudaEventCreate");
  if (rc == 0) {
    fill_random_half<<<1024, threads>>>(static_cast<uint16_t*>(d_in), shape.elements(), 12345);
    step(cudaGetLastError(), "fill");
  }
  auto median_ms = [&](auto&& body) {
    std::vector<float> ms;
    for (int i = 0; i < reps + 3 && rc == 0; ++i) {
      step(cudaEventRecord(a), "cudaEventRecord");
      body();
      step(cudaEventRecord(b), "cudaEventRecord");
      step(cudaEventSynchronize(b), "cudaEventSynchronize");
      float t = 0;
      step(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
      if (i >= 3) // the first three are warm-up
        ms.push_back(t);
    }
    if (ms.empty())
      return 0.0;
    std::sort(ms.begin(), ms.end());
    return static_cast<double>(ms[ms.size() / 2]);
  };
  result->copy_ms = median_ms([&] { step(cudaMemcpyAsync(d_out, d_in, in_bytes, cudaMemcpyDeviceToDevice), "copy"); });
  result->quantize_ms = median_ms([&] { step(quantize(s, shape, d_in, d_packed, nullptr), "quantize"); });
  result->dequantize_ms = median_ms([&] { step(dequantize(s, shape, d_packed, d_out, nullptr), "dequantize"); });
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaFree(d_in);
  cudaFree(d_packed);
  cudaFree(d_out);
  return rc;
}

} // namespace kvtier::quant::gpu
