// Paged decode attention on tensor cores (same contract as paged_decode.hpp).
//
// Grid (partitions, kv_heads, batch), 4 warps. A partition of kPartition
// tokens streams through shared memory in tiles of kTile rows, kStages - 1
// tiles in flight (cp.async), rows gathered from the slots the block table
// names (the first V tiles already loading while the softmax runs):
//   K pass: scores^T[token][head] = K[token][:] . Q[head][:] as a 32x8x16
//           bf16 matrix product per warp (the group's heads padded to 8);
//   softmax of the partition in float (max, exp, sum), probabilities to bf16;
//   V pass: out^T[dim][head] += V^T[dim][token] . P^T[token][head], each warp
//           owning 32 of the 128 dims, accumulated in float.
// The CUDA cores then only do the softmax; partitions are merged by
// merge_partitions (paged_decode_merge.hpp), shared with the CUDA-core kernel.
#include "kernels/model/cuda/paged_decode.hpp"
#include "kernels/model/cuda/paged_decode_merge.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cfloat>

namespace kvtier::model::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kHeadDim = 128;
#ifndef KVTIER_DECODE_WARPS
#define KVTIER_DECODE_WARPS 8
#endif
constexpr int kWarps = KVTIER_DECODE_WARPS; // 4 or 8: loads are issued by every warp
constexpr int kThreads = kWarps * 32;
#ifndef KVTIER_DECODE_TILE
#define KVTIER_DECODE_TILE 64
#endif
#ifndef KVTIER_DECODE_STAGES
#define KVTIER_DECODE_STAGES 3
#endif
constexpr int kTile = KVTIER_DECODE_TILE;     // tokens per tile, 32 a warp in the K pass
constexpr int kStages = KVTIER_DECODE_STAGES; // tiles in shared memory; kStages - 1 in flight
static_assert(kTile % 32 == 0 && kTile <= kWarps * 32 && kStages >= 2 && kWarps % 4 == 0);
constexpr int kLd = kHeadDim + 8; // padded row: ldmatrix rows land in distinct banks
constexpr int kHeadsPadded = 8;   // the matrix product's N
#ifndef KVTIER_DECODE_PARTITION
#define KVTIER_DECODE_PARTITION 1024
#endif
constexpr int kPartition = KVTIER_DECODE_PARTITION; // most tokens per block; a multiple of kTile
constexpr int kChunksPerRow = kHeadDim * 2 / 16;

struct shared_layout {
  static constexpr size_t tiles = 0;                                                  // bf16 [kStages][kTile][kLd]
  static constexpr size_t scores = tiles + kStages * kTile * kLd * sizeof(bf16);      // float [8][kPartition]
  static constexpr size_t probs = scores + kHeadsPadded * kPartition * sizeof(float); // bf16 [8][kPartition]
  static constexpr size_t queries = probs + kHeadsPadded * kPartition * sizeof(bf16); // bf16 [8][kLd]
  static constexpr size_t rows = queries + kHeadsPadded * kLd * sizeof(bf16);         // uint64 [kPartition]
  static constexpr size_t bytes = rows + kPartition * sizeof(uint64_t);
};

__device__ inline void copy_async16(void* shared, const void* global, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  const int bytes = valid ? 16 : 0; // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global), "r"(bytes));
}
__device__ inline void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ inline void wait_all_but_newest() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2));
}

__global__ void __launch_bounds__(kThreads)
    partition_kernel(paged_decode_args a, int partition_tokens, int partitions, float* partial_ml, float* partial_out) {
  extern __shared__ __align__(128) unsigned char smem[];
  auto* tiles = reinterpret_cast<bf16*>(smem + shared_layout::tiles);
  auto* scores = reinterpret_cast<float*>(smem + shared_layout::scores);
  auto* probs = reinterpret_cast<bf16*>(smem + shared_layout::probs);
  auto* queries = reinterpret_cast<bf16*>(smem + shared_layout::queries);
  auto* rows = reinterpret_cast<uint64_t*>(smem + shared_layout::rows); // address of each token's K row
  __shared__ float reduce[kWarps][kHeadsPadded];
  __shared__ float head_max[kHeadsPadded], head_sum[kHeadsPadded];

  const int part = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32;
  const int group = a.q_heads / a.kv_heads;
  const int context = a.positions ? int(a.positions[b] + 1) : a.context_lens[b];
  const int begin = part * partition_tokens;
  const int end = min(context, begin + partition_tokens);
  const int count = end - begin;
  const int first_head = kv_head * group;
  const uint64_t record = (uint64_t(b) * a.q_heads + first_head) * partitions + part;
  if (count <= 0) {
    if (tid < group) {
      partial_ml[2 * (record + uint64_t(tid) * partitions)] = -FLT_MAX;
      partial_ml[2 * (record + uint64_t(tid) * partitions) + 1] = 0.f;
    }
    return;
  }
  const int tiles_needed = (count + kTile - 1) / kTile;

  const int32_t* table = a.block_tables + (a.table_begin ? uint64_t(a.table_begin[b]) : uint64_t(b) * a.max_blocks);
  const uint64_t head_bytes = uint64_t(kv_head) * a.block_tokens * kHeadDim * 2;
  for (int t = tid; t < count; t += kThreads) {
    const int token = begin + t;
    const int block = token / a.block_tokens;
    const uint32_t entry = uint32_t(table[block]);
    // A streamed block's layer slice sits in the staging area, not the pool.
    const char* slice = entry >= a.staged_from
        ? static_cast<const char*>(a.staged) + uint64_t(entry - a.staged_from) * a.slot_stride
        : static_cast<const char*>(a.pool) + a.layer_offset + uint64_t(entry) * a.slot_stride;
    rows[t] = reinterpret_cast<uint64_t>(slice + head_bytes + uint64_t(token - block * a.block_tokens) * kHeadDim * 2);
  }
  for (int i = tid; i < kHeadsPadded * kHeadDim; i += kThreads) {
    const int h = i / kHeadDim, d = i % kHeadDim;
    queries[h * kLd + d] = h < group
        ? (a.q_f32 ? __float2bfloat16(a.q_f32[(uint64_t(b) * a.q_heads + first_head + h) * kHeadDim + d])
                   : static_cast<const bf16*>(a.q)[(uint64_t(b) * a.q_heads + first_head + h) * kHeadDim + d])
        : __float2bfloat16(0.f);
  }
  __syncthreads();

  const char* pool = static_cast<const char*>(a.pool);
  const uint64_t value_bytes = uint64_t(a.kv_heads) * a.block_tokens * kHeadDim * 2;
  // Gathers tile `tile` of K (or V) rows into its buffer; rows past the
  // context are zero-filled so that zero probabilities meet zero values.
  // A thread copies the same 16-byte chunk of kTile / (kThreads / 16) rows.
  const int chunk = tid % kChunksPerRow;
  auto load_tile = [&](int tile, bool value) {
    bf16* buffer = tiles + (tile % kStages) * kTile * kLd;
#pragma unroll
    for (int row = tid / kChunksPerRow; row < kTile; row += kThreads / kChunksPerRow) {
      const int t = tile * kTile + row;
      const bool valid = t < count;
      const char* src = valid ? reinterpret_cast<const char*>(rows[t]) + (value ? value_bytes : 0) + chunk * 16 : pool;
      copy_async16(buffer + row * kLd + chunk * 8, src, valid);
    }
  };
  // kStages - 1 tiles in flight; the buffer a load refills was consumed
  // before the barrier that precedes the load.
  auto prologue = [&](bool value) {
    for (int tile = 0; tile < kStages - 1; ++tile) {
      if (tile < tiles_needed)
        load_tile(tile, value);
      commit_copies();
    }
  };
  auto stream = [&](bool value, bool primed, auto&& consume) {
    if (!primed)
      prologue(value);
    for (int tile = 0; tile < tiles_needed; ++tile) {
      wait_all_but_newest();
      __syncthreads();
      if (tile + kStages - 1 < tiles_needed)
        load_tile(tile + kStages - 1, value);
      commit_copies();
      consume(tile, tiles + (tile % kStages) * kTile * kLd);
    }
    __syncthreads();
  };

  // K pass.
  stream(false, false, [&](int tile, const bf16* buffer) {
    if (warp * 32 >= kTile)
      return;
    wmma::fragment<wmma::accumulator, 32, 8, 16, float> s;
    wmma::fill_fragment(s, 0.f);
#pragma unroll
    for (int k = 0; k < kHeadDim / 16; ++k) {
      wmma::fragment<wmma::matrix_a, 32, 8, 16, bf16, wmma::row_major> keys;
      wmma::fragment<wmma::matrix_b, 32, 8, 16, bf16, wmma::col_major> q;
      wmma::load_matrix_sync(keys, buffer + warp * 32 * kLd + k * 16, kLd);
      wmma::load_matrix_sync(q, queries + k * 16, kLd);
      wmma::mma_sync(s, keys, q, s);
    }
    wmma::store_matrix_sync(scores + tile * kTile + warp * 32, s, kPartition, wmma::mem_col_major);
  });

  // The first V tiles load while the softmax runs (the K pass has released
  // every tile buffer): the pipeline does not drain between the passes.
  prologue(true);

  // Softmax of the partition for each real head.
  for (int g = 0; g < group; ++g) {
    float m = -FLT_MAX;
    for (int t = tid; t < count; t += kThreads)
      m = fmaxf(m, scores[g * kPartition + t]);
    for (int off = 16; off > 0; off /= 2)
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, off));
    if (tid % 32 == 0)
      reduce[warp][g] = m;
  }
  __syncthreads();
  if (tid < group) {
    float m = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w)
      m = fmaxf(m, reduce[w][tid]);
    head_max[tid] = m * a.scale;
  }
  __syncthreads();
  for (int g = 0; g < kHeadsPadded; ++g) {
    float sum = 0.f;
    for (int t = tid; t < tiles_needed * kTile; t += kThreads) {
      float p = 0.f;
      if (g < group && t < count) {
        p = __expf(scores[g * kPartition + t] * a.scale - head_max[g]);
        sum += p;
      }
      probs[g * kPartition + t] = __float2bfloat16(p);
    }
    for (int off = 16; off > 0; off /= 2)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (tid % 32 == 0)
      reduce[warp][g] = sum;
  }
  __syncthreads();
  if (tid < group) {
    float s = 0.f;
    for (int w = 0; w < kWarps; ++w)
      s += reduce[w][tid];
    head_sum[tid] = s;
  }

  // V pass: warp w owns dims (w % 4) * 32.. of every head, over the tiles'
  // 16-token steps k with k % (kWarps / 4) == w / 4.
  const int dims = (warp % 4) * 32, share = warp / 4, shares = kWarps / 4;
  wmma::fragment<wmma::accumulator, 32, 8, 16, float> out;
  wmma::fill_fragment(out, 0.f);
  stream(true, true, [&](int tile, const bf16* buffer) {
#pragma unroll
    for (int k = share; k < kTile / 16; k += shares) {
      wmma::fragment<wmma::matrix_a, 32, 8, 16, bf16, wmma::col_major> values_t;
      wmma::fragment<wmma::matrix_b, 32, 8, 16, bf16, wmma::col_major> p_t;
      wmma::load_matrix_sync(values_t, buffer + k * 16 * kLd + dims, kLd);
      wmma::load_matrix_sync(p_t, probs + tile * kTile + k * 16, kPartition);
      wmma::mma_sync(out, values_t, p_t, out);
    }
  });
  float* out_t = scores; // [shares][8][128], the scores are spent
  static_assert(kWarps / 4 * kHeadsPadded * kHeadDim <= kHeadsPadded * kPartition);
  wmma::store_matrix_sync(out_t + share * kHeadsPadded * kHeadDim + dims, out, kHeadDim, wmma::mem_col_major);
  __syncthreads();
  for (int e = tid; e < group * kHeadDim; e += kThreads) {
    const int g = e / kHeadDim, d = e % kHeadDim;
    float sum = 0.f;
    for (int h = 0; h < shares; ++h)
      sum += out_t[h * kHeadsPadded * kHeadDim + g * kHeadDim + d];
    partial_out[(record + uint64_t(g) * partitions) * kHeadDim + d] = sum;
  }
  if (tid < group) {
    partial_ml[2 * (record + uint64_t(tid) * partitions)] = head_max[tid];
    partial_ml[2 * (record + uint64_t(tid) * partitions) + 1] = head_sum[tid];
  }
}

// Tokens per partition: long partitions amortize each block's pipeline fill
// and softmax, but a small batch needs short ones to fill the GPU (about two
// blocks per multiprocessor).
int partition_tokens_for(const paged_decode_args& a, int multiprocessors) {
  const int per_context = std::max(1, 2 * multiprocessors / std::max(1, a.batch * a.kv_heads));
  const int tokens = (a.max_context + per_context - 1) / per_context;
  return std::clamp((tokens + kTile - 1) / kTile * kTile, kTile, kPartition);
}

} // namespace

uint64_t paged_decode_tc_workspace_bytes(const paged_decode_args& a, int multiprocessors) {
  const int tokens = partition_tokens_for(a, multiprocessors);
  const uint64_t partitions = (a.max_context + tokens - 1) / tokens;
  return uint64_t(a.batch) * a.q_heads * partitions * (2 + kHeadDim) * sizeof(float);
}

int paged_decode_attention_tc(const paged_decode_args& a, void* workspace, int multiprocessors, void* stream) {
  const int tokens = partition_tokens_for(a, multiprocessors);
  const int partitions = (a.max_context + tokens - 1) / tokens;
  const uint64_t records = uint64_t(a.batch) * a.q_heads * partitions;
  auto* ml = static_cast<float*>(workspace);
  auto* out = ml + 2 * records;
  auto s = static_cast<cudaStream_t>(stream);
  const size_t shared = shared_layout::bytes;
  cudaError_t e = cudaFuncSetAttribute(partition_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess)
    return int(e);
  partition_kernel<<<dim3(partitions, a.kv_heads, a.batch), kThreads, shared, s>>>(a, tokens, partitions, ml, out);
  if ((e = cudaGetLastError()) != cudaSuccess)
    return int(e);
  return merge_partitions(a, partitions, ml, out, s);
}

} // namespace kvtier::model::cuda
