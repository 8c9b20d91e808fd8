// Paged decode attention (see paged_decode.hpp). Work split:
//   kernel 1, grid (partitions, kv_heads, batch), 256 threads: 16 threads own
//   one K/V row (8 bf16 each, one 16-byte load), 16 rows in flight per pass,
//   several passes unrolled so each thread has kLoadsInFlight loads pending.
//   Scores for the group's query heads go to shared memory, then the softmax
//   of the partition, then the V pass accumulates in registers.
//   kernel 2, grid (q_heads, batch), 128 threads: merges partitions (merge_partitions, shared with the
//   tensor-core kernel of paged_decode_tc.cu).
#include "kernels/model/cuda/paged_decode.hpp"
#include "kernels/model/cuda/paged_decode_merge.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>

namespace kvtier::model::cuda {
namespace {

constexpr int kHeadDim = 128;
// Tuning knobs, overridable at build time for the sweep in bench/model.
#ifndef KVTIER_DECODE_THREADS
#define KVTIER_DECODE_THREADS 256
#endif
#ifndef KVTIER_DECODE_MIN_BLOCKS
#define KVTIER_DECODE_MIN_BLOCKS 3
#endif
#ifndef KVTIER_DECODE_LOADS
#define KVTIER_DECODE_LOADS 8
#endif
constexpr int kThreads = KVTIER_DECODE_THREADS;
constexpr int kLanesPerRow = kHeadDim / 8; // 16 threads x 8 bf16
constexpr int kRows = kThreads / kLanesPerRow;
constexpr int kLoadsInFlight = KVTIER_DECODE_LOADS;
constexpr int kMaxScores = 8192; // floats of scores in shared memory: group * partition

__device__ inline void unpack(const uint4& raw, float (&f)[8]) {
  const auto* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

// Sums each of `Group` per-lane partial dot products over the 16 lanes that
// share a row, handing a different head to each lane at every halving: 8
// shuffles for 8 heads instead of 32. Returns the sum for head `head`.
template <int Group>
__device__ inline float reduce_heads(const float (&partial)[Group], int lane, int& head) {
  float v[Group];
#pragma unroll
  for (int g = 0; g < Group; ++g)
    v[g] = partial[g];
  head = 0;
  int n = Group;
#pragma unroll
  for (int mask = kLanesPerRow / 2; mask > 0; mask /= 2) {
    if (n > 1) {
      const int half = n / 2;
      const bool upper = (lane & mask) != 0;
#pragma unroll
      for (int i = 0; i < half; ++i) {
        const float send = upper ? v[i] : v[i + half];
        const float keep = upper ? v[i + half] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, mask);
      }
      if (upper)
        head += half;
      n = half;
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], mask);
    }
  }
  return v[0];
}

template <int Group>
__global__ void __launch_bounds__(kThreads, KVTIER_DECODE_MIN_BLOCKS)
    partition_kernel(paged_decode_args a, int partition_tokens, int partitions, float* partial_ml, float* partial_out) {
  extern __shared__ float scores[]; // [Group][partition_tokens], then the partition's slots
  __shared__ float reduce[kThreads / 32][Group];
  __shared__ float head_max[Group];
  __shared__ float head_sum[Group];
  __shared__ float merged[kThreads / 32][Group][kHeadDim]; // per-warp V sums

  const int part = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, lane = tid % kLanesPerRow, row = tid / kLanesPerRow;
  const int warp = tid / 32;
  const int context = a.context_lens[b];
  const int begin = part * partition_tokens;
  const int end = min(context, begin + partition_tokens);
  const int count = end - begin;
  const int first_head = kv_head * Group;
  const uint64_t record = (uint64_t(b) * a.q_heads + first_head) * partitions + part;

  if (count <= 0) { // past this sequence's context: an empty partition
    if (tid < Group) {
      partial_ml[2 * (record + uint64_t(tid) * partitions)] = -FLT_MAX;
      partial_ml[2 * (record + uint64_t(tid) * partitions) + 1] = 0.f;
    }
    return;
  }
  // The partition's slots, read once: a row's address then costs no
  // dependent global load before the load of the row itself.
  auto* slots = reinterpret_cast<int32_t*>(scores + Group * partition_tokens);
  const int first_block = begin / a.block_tokens;
  const int blocks = (end - 1) / a.block_tokens - first_block + 1;
  const int32_t* table = a.block_tables + uint64_t(b) * a.max_blocks + first_block;
  for (int i = tid; i < blocks; i += kThreads)
    slots[i] = table[i];
  __syncthreads();
  const char* layer = static_cast<const char*>(a.pool) + a.layer_offset;
  const uint64_t head_bytes = uint64_t(kv_head) * a.block_tokens * kHeadDim * 2;
  const uint64_t value_bytes = uint64_t(a.kv_heads) * a.block_tokens * kHeadDim * 2;
  auto row_ptr = [&](int t, bool value) {
    const int token = begin + t;
    const int block = token / a.block_tokens;
    const char* p = layer + uint64_t(slots[block - first_block]) * a.slot_stride + head_bytes +
        uint64_t(token - block * a.block_tokens) * kHeadDim * 2 + (value ? value_bytes : 0);
    return reinterpret_cast<const uint4*>(p) + lane;
  };

  float q[Group][8];
#pragma unroll
  for (int g = 0; g < Group; ++g) {
    const auto* qrow = static_cast<const uint4*>(a.q) + (uint64_t(b) * a.q_heads + first_head + g) * kLanesPerRow;
    unpack(qrow[lane], q[g]);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      q[g][i] *= a.scale;
  }

  // K pass: scores.
  // The loop bound is the same for the whole warp: the shuffles below need
  // every lane, also those whose row is past the end.
  for (int pass = 0; pass < count; pass += kRows * kLoadsInFlight) {
    const int base = pass + row;
    uint4 k[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int t = base + u * kRows;
      k[u] = make_uint4(0, 0, 0, 0);
      if (t < count)
        k[u] = __ldg(row_ptr(t, false));
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int t = base + u * kRows;
      float kf[8];
      unpack(k[u], kf);
      float dots[Group];
#pragma unroll
      for (int g = 0; g < Group; ++g) {
        dots[g] = 0.f;
#pragma unroll
        for (int i = 0; i < 8; ++i)
          dots[g] += q[g][i] * kf[i];
      }
      int head = 0;
      const float s = reduce_heads<Group>(dots, lane, head);
      constexpr int kLanesPerHead = Group >= kLanesPerRow ? 1 : kLanesPerRow / Group;
      if (lane % kLanesPerHead == 0 && t < count)
        scores[head * partition_tokens + t] = s;
    }
  }
  __syncthreads();

  // Softmax of the partition, per query head.
  float local_max[Group];
#pragma unroll
  for (int g = 0; g < Group; ++g) {
    local_max[g] = -FLT_MAX;
    for (int t = tid; t < count; t += kThreads)
      local_max[g] = fmaxf(local_max[g], scores[g * partition_tokens + t]);
    for (int off = 16; off > 0; off /= 2)
      local_max[g] = fmaxf(local_max[g], __shfl_xor_sync(0xffffffffu, local_max[g], off));
    if (tid % 32 == 0)
      reduce[warp][g] = local_max[g];
  }
  __syncthreads();
  if (tid < Group) {
    float m = -FLT_MAX;
    for (int w = 0; w < kThreads / 32; ++w)
      m = fmaxf(m, reduce[w][tid]);
    head_max[tid] = m;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < Group; ++g) {
    float sum = 0.f;
    for (int t = tid; t < count; t += kThreads) {
      const float p = __expf(scores[g * partition_tokens + t] - head_max[g]);
      scores[g * partition_tokens + t] = p;
      sum += p;
    }
    for (int off = 16; off > 0; off /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (tid % 32 == 0)
      reduce[warp][g] = sum;
  }
  __syncthreads();
  if (tid < Group) {
    float s = 0.f;
    for (int w = 0; w < kThreads / 32; ++w)
      s += reduce[w][tid];
    head_sum[tid] = s;
  }

  // V pass: this thread's 8 dims of every head, over its rows.
  float acc[Group][8] = {};
  for (int pass = 0; pass < count; pass += kRows * kLoadsInFlight) {
    const int base = pass + row;
    uint4 v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int t = base + u * kRows;
      if (t < count)
        v[u] = __ldg(row_ptr(t, true));
    }
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) {
      const int t = base + u * kRows;
      if (t >= count)
        continue;
      float vf[8];
      unpack(v[u], vf);
#pragma unroll
      for (int g = 0; g < Group; ++g) {
        const float p = scores[g * partition_tokens + t];
#pragma unroll
        for (int i = 0; i < 8; ++i)
          acc[g][i] += p * vf[i];
      }
    }
  }
  // Two rows per warp: fold lanes 16..31 onto 0..15, then across warps.
#pragma unroll
  for (int g = 0; g < Group; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i)
      acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], 16);
  if (tid % 32 < kLanesPerRow)
#pragma unroll
    for (int g = 0; g < Group; ++g)
#pragma unroll
      for (int i = 0; i < 8; ++i)
        merged[warp][g][lane * 8 + i] = acc[g][i];
  __syncthreads();
  for (int e = tid; e < Group * kHeadDim; e += kThreads) {
    const int g = e / kHeadDim, d = e % kHeadDim;
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w)
      s += merged[w][g][d];
    partial_out[(record + uint64_t(g) * partitions) * kHeadDim + d] = s;
  }
  if (tid < Group) {
    partial_ml[2 * (record + uint64_t(tid) * partitions)] = head_max[tid];
    partial_ml[2 * (record + uint64_t(tid) * partitions) + 1] = head_sum[tid];
  }
}

int group_of(const paged_decode_args& a) {
  return a.kv_heads > 0 ? a.q_heads / a.kv_heads : 0;
}

// Tokens per partition: enough partitions that the grid fills the GPU about
// twice, a multiple of 64, bounded by the scores' shared memory.
int partition_tokens_for(const paged_decode_args& a, int multiprocessors) {
  const int group = group_of(a);
  const int per_context = std::max(1, 2 * multiprocessors / std::max(1, a.batch * a.kv_heads));
  int tokens = (a.max_context + per_context - 1) / per_context;
  tokens = std::max(64, (tokens + 63) / 64 * 64);
  return std::min(tokens, kMaxScores / group / 64 * 64);
}

template <int Group>
cudaError_t launch(const paged_decode_args& a, int tokens, int partitions, float* ml, float* out, cudaStream_t s) {
  const size_t shared =
      size_t(Group) * tokens * sizeof(float) + (size_t(tokens) / a.block_tokens + 2) * sizeof(int32_t);
  cudaError_t e =
      cudaFuncSetAttribute(partition_kernel<Group>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess)
    return e;
  partition_kernel<Group>
      <<<dim3(partitions, a.kv_heads, a.batch), kThreads, shared, s>>>(a, tokens, partitions, ml, out);
  return cudaGetLastError();
}

} // namespace

namespace {
__global__ void merge_kernel(paged_decode_args a, int partitions, const float* partial_ml, const float* partial_out) {
  const int head = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  const uint64_t first = (uint64_t(b) * a.q_heads + head) * partitions;
  float m = -FLT_MAX;
  for (int p = 0; p < partitions; ++p)
    m = fmaxf(m, partial_ml[2 * (first + p)]);
  float sum = 0.f, out = 0.f;
  for (int p = 0; p < partitions; ++p) {
    const float l = partial_ml[2 * (first + p) + 1];
    if (l == 0.f)
      continue;
    const float w = __expf(partial_ml[2 * (first + p)] - m);
    sum += w * l;
    out += w * partial_out[(first + p) * kHeadDim + d];
  }
  static_cast<__nv_bfloat16*>(a.out)[(uint64_t(b) * a.q_heads + head) * kHeadDim + d] = __float2bfloat16(out / sum);
}

} // namespace

int merge_partitions(const paged_decode_args& a, int partitions, const float* partial_ml, const float* partial_out,
                     void* stream) {
  merge_kernel<<<dim3(a.q_heads, a.batch), kHeadDim, 0, static_cast<cudaStream_t>(stream)>>>(a, partitions, partial_ml,
                                                                                             partial_out);
  return int(cudaGetLastError());
}

std::string paged_decode_check_args(const paged_decode_args& a) {
  if (a.head_dim != kHeadDim)
    return "head_dim must be 128";
  if (a.kv_heads <= 0 || a.q_heads % a.kv_heads != 0)
    return "q_heads must be a multiple of kv_heads";
  const int group = group_of(a);
  if (group != 1 && group != 2 && group != 4 && group != 8)
    return "query group must be 1, 2, 4 or 8";
  if (a.batch <= 0 || a.max_context <= 0 || a.block_tokens <= 0)
    return "batch, max_context, block_tokens must be > 0";
  if (!a.table_begin && int64_t(a.max_blocks) * a.block_tokens < a.max_context)
    return "max_blocks * block_tokens < max_context";
  if ((!a.q && !a.q_f32) || !a.out || !a.pool || !a.block_tables || (!a.context_lens && !a.positions))
    return "a pointer is null";
  return {};
}

uint64_t paged_decode_workspace_bytes(const paged_decode_args& a, int multiprocessors) {
  const int tokens = partition_tokens_for(a, multiprocessors);
  const uint64_t partitions = (a.max_context + tokens - 1) / tokens;
  const uint64_t records = uint64_t(a.batch) * a.q_heads * partitions;
  return records * (2 + kHeadDim) * sizeof(float);
}

int paged_decode_attention(const paged_decode_args& a, void* workspace, int multiprocessors, void* stream) {
  if (a.kv_fp8)
    return int(cudaErrorNotSupported); // float8 KV: the tensor-core kernel only
  const int tokens = partition_tokens_for(a, multiprocessors);
  const int partitions = (a.max_context + tokens - 1) / tokens;
  const uint64_t records = uint64_t(a.batch) * a.q_heads * partitions;
  auto* ml = static_cast<float*>(workspace);
  auto* out = ml + 2 * records;
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (group_of(a)) {
    case 1:
      e = launch<1>(a, tokens, partitions, ml, out, s);
      break;
    case 2:
      e = launch<2>(a, tokens, partitions, ml, out, s);
      break;
    case 4:
      e = launch<4>(a, tokens, partitions, ml, out, s);
      break;
    case 8:
      e = launch<8>(a, tokens, partitions, ml, out, s);
      break;
    default:
      break;
  }
  if (e != cudaSuccess)
    return int(e);
  return merge_partitions(a, partitions, ml, out, s);
}

} // namespace kvtier::model::cuda
