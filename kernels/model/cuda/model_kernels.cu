// The model's CUDA kernels (model_kernels.hpp). float arithmetic, bf16 storage.

#include "kernels/model/cuda/model_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cmath>

namespace kvtier::model::cuda {
namespace {

__device__ inline float bf(uint16_t v) {
  return __uint_as_float(uint32_t{v} << 16);
}
__device__ inline uint16_t to_bf(float f) {
  __nv_bfloat16 b = __float2bfloat16_rn(f);
  return *reinterpret_cast<uint16_t*>(&b);
}

unsigned blocks_for(uint64_t n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

__global__ void embed_kernel(const uint16_t* table, const uint32_t* tokens, uint32_t rows, uint32_t hidden, float* x) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= uint64_t{rows} * hidden)
    return;
  uint64_t row = i / hidden, col = i % hidden;
  x[i] = bf(table[uint64_t{tokens[row]} * hidden + col]);
}

__global__ void rms_norm_kernel(const float* x, const uint16_t* w, uint32_t n, float eps, uint16_t* out) {
  const float* xr = x + uint64_t{blockIdx.x} * n;
  __shared__ float partial[32];
  float ss = 0;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    ss += xr[i] * xr[i];
  for (int o = 16; o > 0; o >>= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0;
    for (int o = 16; o > 0; o >>= 1)
      ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0)
      partial[0] = ss;
  }
  __syncthreads();
  float inv = rsqrtf(partial[0] / n + eps);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    out[uint64_t{blockIdx.x} * n + i] = to_bf(xr[i] * inv * bf(w[i]));
}

// x += y, then out = bf16(x / rms(x) * weight), one row per block: the
// residual add and the next norm in one pass over the row.
__global__ void add_rms_norm_kernel(float* x, const float* y, const uint16_t* w, uint32_t n, float eps, uint16_t* out) {
  float* xr = x + uint64_t{blockIdx.x} * n;
  const float* yr = y + uint64_t{blockIdx.x} * n;
  __shared__ float partial[32];
  float ss = 0;
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float sum = xr[i] + yr[i];
    xr[i] = sum;
    ss += sum * sum;
  }
  for (int o = 16; o > 0; o >>= 1)
    ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  if (threadIdx.x < 32) {
    ss = threadIdx.x < (blockDim.x >> 5) ? partial[threadIdx.x] : 0;
    for (int o = 16; o > 0; o >>= 1)
      ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (threadIdx.x == 0)
      partial[0] = ss;
  }
  __syncthreads();
  float inv = rsqrtf(partial[0] / n + eps);
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    out[uint64_t{blockIdx.x} * n + i] = to_bf(xr[i] * inv * bf(w[i]));
}

// One thread per (row, head, j < D/2) of the query and key heads, and per
// (row, element) of the values: rotates the fused projection's q and k into
// their own buffers and copies v.
__global__ void split_qkv_rope_kernel(const float* qkv, float* q, float* k, float* v, const int64_t* positions,
                                      uint32_t rows, uint32_t q_heads, uint32_t kv_heads, uint32_t d,
                                      const double* inv_freq) {
  const uint32_t half = d / 2, heads = q_heads + kv_heads, width = (q_heads + 2 * kv_heads) * d;
  const uint64_t rotations = uint64_t{rows} * heads * half;
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= rotations) {
    i -= rotations;
    if (i >= uint64_t{rows} * kv_heads * d)
      return;
    const uint64_t row = i / (uint64_t{kv_heads} * d), e = i % (uint64_t{kv_heads} * d);
    v[i] = qkv[row * width + uint64_t{q_heads + kv_heads} * d + e];
    return;
  }
  const uint64_t row = i / (uint64_t{heads} * half);
  const auto rest = static_cast<uint32_t>(i % (uint64_t{heads} * half));
  const uint32_t h = rest / half, j = rest % half;
  double angle = static_cast<double>(positions[row]) * inv_freq[j]; // as the CPU twin: double
  float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
  const float* from = qkv + row * width + uint64_t{h} * d;
  float* to = h < q_heads ? q + (row * q_heads + h) * d : k + (row * kv_heads + (h - q_heads)) * d;
  const float a = from[j], b = from[j + half];
  to[j] = a * c - b * s;
  to[j + half] = b * c + a * s;
}

__global__ void store_kv_kernel(const float* k, const float* v, paged_rows r, uint32_t layer, uint16_t* pool) {
  const uint32_t D = r.head_dim, B = r.block_tokens;
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= uint64_t{r.rows} * r.kv_heads * D)
    return;
  uint64_t row = i / (uint64_t{r.kv_heads} * D);
  uint32_t rest = static_cast<uint32_t>(i % (uint64_t{r.kv_heads} * D));
  uint32_t h = rest / D, d = rest % D;
  int64_t pos = r.positions[row];
  if (pos < r.context[row])
    return;
  uint32_t slot = r.tables[r.table_begin[row] + pos / B];
  uint64_t slice = (uint64_t{layer} * r.slots + slot) * (uint64_t{2} * r.kv_heads * B * D);
  uint64_t at = slice + (uint64_t{h} * B + pos % B) * D + d;
  pool[at] = to_bf(k[i]);
  pool[at + uint64_t{r.kv_heads} * B * D] = to_bf(v[i]);
}

// One block per (mass row, query head): the row's softmax over its context
// in three sweeps (maximum, sum, weights; the scores recomputed each time,
// so no scratch grows with the context). Each sweep of kThreads positions
// leaves its weights in shared memory and one thread per table block adds
// them up in position order, into this (row, head)'s own row of `partial`:
// no atomics, so the sums are the same every run.
__global__ void block_mass_kernel(const float* q, paged_rows r, uint32_t layer, uint32_t q_heads, const void* staged,
                                  uint32_t staged_from, const uint32_t* mass_rows, uint32_t stride, float* partial) {
  constexpr uint32_t kThreads = 256;
  __shared__ float reduce[kThreads / 32];
  __shared__ float weight[kThreads];
  const uint32_t item = blockIdx.x, h = blockIdx.y, tid = threadIdx.x;
  const uint32_t row = mass_rows[item];
  const uint32_t D = r.head_dim, B = r.block_tokens, kvh = h / (q_heads / r.kv_heads);
  const int64_t len = r.positions[row] + 1;
  const uint32_t* table = r.tables + r.table_begin[row];
  const float* query = q + (uint64_t{row} * q_heads + h) * D;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  const uint64_t slice = uint64_t{2} * r.kv_heads * B * D; // elements of one slot's layer slice
  float* mine = partial + (uint64_t{item} * q_heads + h) * stride;
  auto score = [&](int64_t p) {
    const uint32_t entry = table[p / B];
    const uint16_t* base = entry >= staged_from ? static_cast<const uint16_t*>(staged) + (entry - staged_from) * slice
                                                : r.pool + (uint64_t{layer} * r.slots + entry) * slice;
    const uint16_t* key = base + (uint64_t{kvh} * B + static_cast<uint64_t>(p % B)) * D;
    float sum = 0;
    for (uint32_t d = 0; d < D; ++d)
      sum += query[d] * bf(key[d]);
    return sum * scale;
  };
  // Block-wide reduction (maximum or sum); every thread gets the result.
  auto all_reduce = [&](float v, bool take_max) {
    for (int o = 16; o > 0; o >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, v, o);
      v = take_max ? fmaxf(v, other) : v + other;
    }
    if (tid % 32 == 0)
      reduce[tid / 32] = v;
    __syncthreads();
    v = reduce[0];
    for (uint32_t w = 1; w < kThreads / 32; ++w)
      v = take_max ? fmaxf(v, reduce[w]) : v + reduce[w];
    __syncthreads();
    return v;
  };
  for (uint32_t b = tid; b < stride; b += kThreads) // the whole row: the sum reads every table block
    mine[b] = 0;
  float top = -INFINITY;
  for (int64_t p = tid; p < len; p += kThreads)
    top = fmaxf(top, score(p));
  top = all_reduce(top, true);
  float total = 0;
  for (int64_t p = tid; p < len; p += kThreads)
    total += expf(score(p) - top);
  const float inverse = 1.0f / all_reduce(total, false);
  for (int64_t first = 0; first < len; first += kThreads) {
    const int64_t end = min(first + int64_t{kThreads}, len);
    weight[tid] = first + tid < end ? expf(score(first + tid) - top) * inverse : 0.0f;
    __syncthreads();
    const int64_t first_block = first / B, last_block = (end - 1) / B;
    for (int64_t b = first_block + tid; b <= last_block; b += kThreads) {
      float sum = 0;
      for (int64_t p = max(first, b * B); p < min(end, (b + 1) * B); ++p)
        sum += weight[p - first];
      mine[b] += sum;
    }
    __syncthreads();
  }
}

// One block per sequence that asked: its rows' and heads' partial sums, in a
// fixed order, added to its block_mass (and the last row's alone to its
// last_block_mass). One writer per element: the same sums every run.
__global__ void block_mass_sum_kernel(const uint32_t* mass_sequences, uint32_t q_heads, uint32_t stride,
                                      const float* partial, float* mass) {
  const uint32_t* m = mass_sequences + 5 * blockIdx.x; // {first row item, rows, at, also, blocks}
  const uint32_t first = m[0], rows = m[1], at = m[2], also = m[3], blocks = m[4];
  for (uint32_t b = threadIdx.x; b < blocks; b += blockDim.x) {
    float all = 0, last = 0;
    for (uint32_t i = 0; i < rows; ++i)
      for (uint32_t h = 0; h < q_heads; ++h) {
        const float v = partial[((uint64_t{first} + i) * q_heads + h) * stride + b];
        all += v;
        if (i + 1 == rows)
          last += v;
      }
    mass[at + b] += all;
    mass[also + b] += last;
  }
}

__global__ void store_kv_fp8_kernel(const float* k, const float* v, paged_rows r, uint32_t layer, uint8_t* pool,
                                    float k_inverse, float v_inverse) {
  const uint32_t D = r.head_dim, B = r.block_tokens;
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= uint64_t{r.rows} * r.kv_heads * D)
    return;
  uint64_t row = i / (uint64_t{r.kv_heads} * D);
  uint32_t rest = static_cast<uint32_t>(i % (uint64_t{r.kv_heads} * D));
  uint32_t h = rest / D, d = rest % D;
  int64_t pos = r.positions[row];
  if (pos < r.context[row])
    return;
  uint32_t slot = r.tables[r.table_begin[row] + pos / B];
  uint64_t slice = (uint64_t{layer} * r.slots + slot) * (uint64_t{2} * r.kv_heads * B * D);
  uint64_t at = slice + (uint64_t{h} * B + pos % B) * D + d;
  pool[at] = __nv_cvt_float_to_fp8(k[i] * k_inverse, __NV_SATFINITE, __NV_E4M3);
  pool[at + uint64_t{r.kv_heads} * B * D] = __nv_cvt_float_to_fp8(v[i] * v_inverse, __NV_SATFINITE, __NV_E4M3);
}

struct attention_args {
  const float* q;
  paged_rows r;
  uint32_t layer, q_heads, split_tokens, splits;
  float scale;
  float *part_m, *part_l, *part_acc;
};

// One block per (row, KV head, split): its warps walk the split's positions,
// each position's K and V read once for the G query heads of the group, with
// an online softmax per head; the warps then merge in shared memory.
template <int G, int E>
__global__ void attention_partial(attention_args a) {
  extern __shared__ float smem[];
  const uint32_t row = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const uint32_t D = a.r.head_dim, B = a.r.block_tokens;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int64_t n = a.r.positions[row] + 1;
  const int64_t begin = int64_t{split} * a.split_tokens;
  const int64_t end = min(n, begin + int64_t{a.split_tokens});
  float q[G][E], m[G], l[G], acc[G][E];
  for (int g = 0; g < G; ++g) {
    m[g] = -INFINITY;
    l[g] = 0;
    for (int e = 0; e < E; ++e) {
      uint32_t d = lane + 32 * e;
      q[g][e] = d < D ? a.q[(uint64_t{row} * a.q_heads + kvh * G + g) * D + d] * a.scale : 0.0f;
      acc[g][e] = 0;
    }
  }
  const uint32_t* table = a.r.tables + a.r.table_begin[row];
  const uint64_t slice_elems = uint64_t{2} * a.r.kv_heads * B * D;
  for (int64_t p = begin + warp; p < end; p += warps) {
    uint32_t slot = table[p / B];
    const uint16_t* k =
        a.r.pool + (uint64_t{a.layer} * a.r.slots + slot) * slice_elems + (uint64_t{kvh} * B + p % B) * D;
    const uint16_t* v = k + uint64_t{a.r.kv_heads} * B * D;
    float kk[E], vv[E];
    for (int e = 0; e < E; ++e) {
      uint32_t d = lane + 32 * e;
      kk[e] = d < D ? bf(k[d]) : 0.0f;
      vv[e] = d < D ? bf(v[d]) : 0.0f;
    }
    for (int g = 0; g < G; ++g) {
      float s = 0;
      for (int e = 0; e < E; ++e)
        s += q[g][e] * kk[e];
      for (int o = 16; o > 0; o >>= 1)
        s += __shfl_xor_sync(0xffffffffu, s, o);
      float m_new = fmaxf(m[g], s);
      float c = __expf(m[g] - m_new), w = __expf(s - m_new);
      l[g] = l[g] * c + w;
      for (int e = 0; e < E; ++e)
        acc[g][e] = acc[g][e] * c + w * vv[e];
      m[g] = m_new;
    }
  }
  float* sm_m = smem;               // [warps][G]
  float* sm_l = sm_m + warps * G;   // [warps][G]
  float* sm_acc = sm_l + warps * G; // [warps][G][D]
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      sm_m[warp * G + g] = m[g];
      sm_l[warp * G + g] = l[g];
    }
    for (int e = 0; e < E; ++e) {
      uint32_t d = lane + 32 * e;
      if (d < D)
        sm_acc[(warp * G + g) * D + d] = acc[g][e];
    }
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < G * D; i += blockDim.x) {
    uint32_t g = i / D, d = i % D;
    float top = -INFINITY;
    for (int w = 0; w < warps; ++w)
      top = fmaxf(top, sm_m[w * G + g]);
    float sum = 0, out = 0;
    if (top > -INFINITY)
      for (int w = 0; w < warps; ++w) {
        float f = __expf(sm_m[w * G + g] - top);
        sum += sm_l[w * G + g] * f;
        out += sm_acc[(w * G + g) * D + d] * f;
      }
    uint64_t idx = (uint64_t{row} * a.q_heads + kvh * G + g) * a.splits + split;
    a.part_acc[idx * D + d] = out;
    if (d == 0) {
      a.part_m[idx] = top;
      a.part_l[idx] = sum;
    }
  }
}

__global__ void attention_combine(attention_args a, uint16_t* out_bf16, float* out_f32) {
  const uint32_t row = blockIdx.x, h = blockIdx.y, D = a.r.head_dim;
  const uint64_t base = (uint64_t{row} * a.q_heads + h) * a.splits;
  float top = -INFINITY;
  for (uint32_t s = 0; s < a.splits; ++s)
    top = fmaxf(top, a.part_m[base + s]);
  for (uint32_t d = threadIdx.x; d < D; d += blockDim.x) {
    float sum = 0, out = 0;
    for (uint32_t s = 0; s < a.splits; ++s) {
      float m = a.part_m[base + s];
      if (m == -INFINITY)
        continue;
      float f = __expf(m - top);
      sum += a.part_l[base + s] * f;
      out += a.part_acc[(base + s) * D + d] * f;
    }
    float value = out / sum;
    uint64_t at = (uint64_t{row} * a.q_heads + h) * D + d;
    out_bf16[at] = to_bf(value);
    if (out_f32)
      out_f32[at] = value;
  }
}

__global__ void add_kernel(float* x, const float* y, uint64_t n) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i < n)
    x[i] += y[i];
}

__global__ void swiglu_rows_kernel(const float* gate_up, uint32_t rows, uint32_t width, uint16_t* out) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= uint64_t{rows} * width)
    return;
  const uint64_t row = i / width, j = i % width;
  const float g = gate_up[row * 2 * width + j];
  out[i] = to_bf(g / (1.0f + __expf(-g)) * gate_up[row * 2 * width + width + j]);
}

// One block per row: each thread scans a stride, then a tree in shared
// memory; equal values keep the lower index (std::max_element's choice).
__global__ void argmax_kernel(const float* logits, uint32_t vocab, uint32_t* index, float* value) {
  __shared__ float best[256];
  __shared__ uint32_t at[256];
  const float* row = logits + uint64_t{blockIdx.x} * vocab;
  float v = -INFINITY;
  uint32_t i = 0;
  for (uint32_t j = threadIdx.x; j < vocab; j += blockDim.x)
    if (row[j] > v || (j == threadIdx.x && v == -INFINITY)) {
      v = row[j];
      i = j;
    }
  best[threadIdx.x] = v;
  at[threadIdx.x] = i;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float o = best[threadIdx.x + half];
      const uint32_t oi = at[threadIdx.x + half];
      if (o > best[threadIdx.x] || (o == best[threadIdx.x] && oi < at[threadIdx.x])) {
        best[threadIdx.x] = o;
        at[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    index[blockIdx.x] = at[0];
    value[blockIdx.x] = best[0];
  }
}

__global__ void to_bf16_kernel(const float* x, uint64_t n, uint16_t* out) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i < n)
    out[i] = to_bf(x[i]);
}

__global__ void fill_random_kernel(uint16_t* out, uint64_t n, float center, float spread, uint64_t seed) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= n)
    return;
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  out[i] = to_bf(center + spread * (2 * u - 1));
}

__global__ void fill_random_fp8_kernel(uint8_t* out, uint64_t n, float center, float spread, uint64_t seed) {
  uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x;
  if (i >= n)
    return;
  uint64_t z = seed * 0x9e3779b97f4a7c15ULL + i;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
  out[i] = __nv_cvt_float_to_fp8(center + spread * (2 * u - 1), __NV_SATFINITE, __NV_E4M3);
}

template <int G, int E>
void launch_partial(const attention_args& a, cudaStream_t s) {
  const int threads = 128;
  size_t shared = sizeof(float) * (threads / 32) * G * (2 + a.r.head_dim);
  attention_partial<G, E><<<dim3(a.r.rows, a.r.kv_heads, a.splits), threads, shared, s>>>(a);
}

template <int G>
bool dispatch_e(const attention_args* a, uint32_t head_dim, cudaStream_t s) {
  uint32_t e = (head_dim + 31) / 32;
  if (e == 1)
    return a ? (launch_partial<G, 1>(*a, s), true) : true;
  if (e == 2)
    return a ? (launch_partial<G, 2>(*a, s), true) : true;
  if (e <= 4)
    return a ? (launch_partial<G, 4>(*a, s), true) : true;
  if (e <= 8)
    return a ? (launch_partial<G, 8>(*a, s), true) : true;
  return false;
}

bool dispatch(const attention_args* a, uint32_t group, uint32_t head_dim, cudaStream_t s) {
  switch (group) {
    case 1:
      return dispatch_e<1>(a, head_dim, s);
    case 2:
      return dispatch_e<2>(a, head_dim, s);
    case 4:
      return dispatch_e<4>(a, head_dim, s);
    case 8:
      return dispatch_e<8>(a, head_dim, s);
    default:
      return false;
  }
}

} // namespace

void embed(const uint16_t* table, const uint32_t* tokens, uint32_t rows, uint32_t hidden, float* x, cudaStream_t s) {
  uint64_t n = uint64_t{rows} * hidden;
  embed_kernel<<<blocks_for(n, 256), 256, 0, s>>>(table, tokens, rows, hidden, x);
}

void rms_norm(const float* x, const uint16_t* weight, uint32_t rows, uint32_t n, float eps, uint16_t* out,
              cudaStream_t s) {
  rms_norm_kernel<<<rows, 256, 0, s>>>(x, weight, n, eps, out);
}

void add_rms_norm(float* x, const float* y, const uint16_t* weight, uint32_t rows, uint32_t n, float eps, uint16_t* out,
                  cudaStream_t s) {
  add_rms_norm_kernel<<<rows, 256, 0, s>>>(x, y, weight, n, eps, out);
}

void split_qkv_rope(const float* qkv, float* q, float* k, float* v, const paged_rows& r, uint32_t q_heads,
                    const double* inv_freq, cudaStream_t s) {
  const uint64_t n =
      uint64_t{r.rows} * (q_heads + r.kv_heads) * (r.head_dim / 2) + uint64_t{r.rows} * r.kv_heads * r.head_dim;
  const int64_t* rotate_by = r.rope_positions ? r.rope_positions : r.positions;
  split_qkv_rope_kernel<<<blocks_for(n, 256), 256, 0, s>>>(qkv, q, k, v, rotate_by, r.rows, q_heads, r.kv_heads,
                                                           r.head_dim, inv_freq);
}

void store_kv(const float* k, const float* v, const paged_rows& r, uint32_t layer, uint16_t* pool, cudaStream_t s) {
  uint64_t n = uint64_t{r.rows} * r.kv_heads * r.head_dim;
  store_kv_kernel<<<blocks_for(n, 256), 256, 0, s>>>(k, v, r, layer, pool);
}

void store_kv_fp8(const float* k, const float* v, const paged_rows& r, uint32_t layer, uint8_t* pool, float k_scale,
                  float v_scale, cudaStream_t s) {
  uint64_t n = uint64_t{r.rows} * r.kv_heads * r.head_dim;
  store_kv_fp8_kernel<<<blocks_for(n, 256), 256, 0, s>>>(k, v, r, layer, pool, 1.0f / k_scale, 1.0f / v_scale);
}

void block_mass(const float* q, const paged_rows& r, uint32_t layer, uint32_t q_heads, const void* staged,
                uint32_t staged_from, const uint32_t* mass_rows, uint32_t rows, const uint32_t* mass_sequences,
                uint32_t sequences, uint32_t stride, float* partial, float* mass, cudaStream_t s) {
  if (rows == 0)
    return;
  block_mass_kernel<<<dim3(rows, q_heads), 256, 0, s>>>(q, r, layer, q_heads, staged, staged_from, mass_rows, stride,
                                                        partial);
  block_mass_sum_kernel<<<sequences, 256, 0, s>>>(mass_sequences, q_heads, stride, partial, mass);
}

uint64_t attention_scratch_floats(uint32_t rows, uint32_t q_heads, uint32_t head_dim, uint32_t splits) {
  return uint64_t{rows} * q_heads * splits * (2 + head_dim);
}

bool attention_supported(uint32_t group, uint32_t head_dim) {
  return dispatch(nullptr, group, head_dim, nullptr);
}

void paged_attention(const float* q, const paged_rows& r, uint32_t layer, uint32_t q_heads, uint32_t split_tokens,
                     uint32_t splits, float* scratch, uint16_t* out_bf16, float* out_f32, cudaStream_t s) {
  attention_args a{
      q,       r,       layer,  q_heads, split_tokens, splits, 1.0f / sqrtf(static_cast<float>(r.head_dim)),
      nullptr, nullptr, nullptr};
  uint64_t parts = uint64_t{r.rows} * q_heads * splits;
  a.part_m = scratch;
  a.part_l = scratch + parts;
  a.part_acc = scratch + 2 * parts;
  dispatch(&a, q_heads / r.kv_heads, r.head_dim, s);
  const unsigned combine_threads = r.head_dim < 128 ? 32 : 128;
  attention_combine<<<dim3(r.rows, q_heads), combine_threads, 0, s>>>(a, out_bf16, out_f32);
}

void add_in_place(float* x, const float* y, uint64_t n, cudaStream_t s) {
  add_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, y, n);
}

void swiglu_rows(const float* gate_up, uint32_t rows, uint32_t width, uint16_t* out, cudaStream_t s) {
  swiglu_rows_kernel<<<blocks_for(uint64_t{rows} * width, 256), 256, 0, s>>>(gate_up, rows, width, out);
}

void argmax_rows(const float* logits, uint32_t rows, uint32_t vocab, uint32_t* index, float* value, cudaStream_t s) {
  argmax_kernel<<<rows, 256, 0, s>>>(logits, vocab, index, value);
}

void to_bf16(const float* x, uint64_t n, uint16_t* out, cudaStream_t s) {
  to_bf16_kernel<<<blocks_for(n, 256), 256, 0, s>>>(x, n, out);
}

void fill_random(uint16_t* out, uint64_t n, float center, float spread, uint64_t seed, cudaStream_t s) {
  fill_random_kernel<<<blocks_for(n, 256), 256, 0, s>>>(out, n, center, spread, seed);
}

void fill_random_fp8(uint8_t* out, uint64_t n, float center, float spread, uint64_t seed, cudaStream_t s) {
  fill_random_fp8_kernel<<<blocks_for(n, 256), 256, 0, s>>>(out, n, center, spread, seed);
}

} // namespace kvtier::model::cuda
