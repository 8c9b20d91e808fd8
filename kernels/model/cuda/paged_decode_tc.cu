// Paged decode attention on tensor cores (same contract as paged_decode.hpp).
//
// Flash-decoding shape. Grid (partitions, kv_heads, batch), kWarps warps. A
// partition's tokens go to its warps in 16-token tiles, round robin, and each
// warp streams its own tiles through its own ring of kStages buffers (float8 KV:
// KVTIER_DECODE_FP8_STAGES, since its tiles are half the bytes) in shared
// memory (K and V of a tile in one cp.async group, kStages - 1 in flight). No
// barrier is shared per tile and no load waits for a softmax: the memory
// system sees a steady stream, which is all decode attention needs (4 FLOP per
// byte of KV at group 4).
//
// Per tile, in the mma.sync register layout (m16n8k16, bf16 in, float
// accumulate), with the group's query heads as rows (padded to 16 with zeros):
//   S = Q K^T (16 x 16 tokens), Q kept in registers for the whole partition;
//   an online softmax per head in the exp2 domain (running max and sum);
//   O (16 x 128) = O * correction + P V, P taken from S's registers (the
//   accumulator layout of S is the A layout of P V, as in FlashAttention 2).
// K rows are read as stored ([token][dim] is the B operand's column-major);
// V rows are transposed on load (ldmatrix .trans). Rows are stored in shared
// memory with 16-byte chunk c of row r at chunk c ^ (r % 8), so the 8 rows an
// ldmatrix reads hit 8 distinct bank groups without padding.
//
// Float8 KV (args.kv_fp8): tiles load at one byte an element, and each warp
// widens its landed tile to fp16 (exact for e4m3) in one swizzled buffer of
// its own; the products then run in fp16 (queries and probabilities rounded
// to fp16), k_scale folds into the score scale and v_scale into the output.
// Half the bytes cross HBM for the same context.
//
// At the end the warps' (max, sum, O) merge through shared memory into the
// partition's record, and merge_partitions (paged_decode_merge.hpp, shared
// with the CUDA-core kernel) merges the partitions; a context that is one
// partition is written out directly, without the second launch.
#include "kernels/model/cuda/paged_decode.hpp"
#include "kernels/model/cuda/paged_decode_merge.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

namespace kvtier::model::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeadDim = 128;
// Tuning knobs, overridable at build time for the sweep in bench/model.
#ifndef KVTIER_DECODE_WARPS
#define KVTIER_DECODE_WARPS 4
#endif
#ifndef KVTIER_DECODE_STAGES
#define KVTIER_DECODE_STAGES 3
#endif
#ifndef KVTIER_DECODE_PARTITION
#define KVTIER_DECODE_PARTITION 4096
#endif
#ifndef KVTIER_DECODE_FP8_STAGES
#define KVTIER_DECODE_FP8_STAGES 5
#endif
#ifndef KVTIER_DECODE_MIN_BLOCKS
#define KVTIER_DECODE_MIN_BLOCKS 2
#endif
constexpr int kWarps = KVTIER_DECODE_WARPS;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 16;                           // tokens a warp takes per step
constexpr int kStages = KVTIER_DECODE_STAGES;       // buffers in a warp's ring; kStages - 1 in flight
constexpr int kPartition = KVTIER_DECODE_PARTITION; // most tokens per block
constexpr int kChunks = kHeadDim * 2 / 16;          // 16-byte chunks per 16-bit row
constexpr int kTileBytes = kTile * kHeadDim * 2;    // K (or V) of one tile in 16 bits
constexpr int kStageBytes = 2 * kTileBytes;
constexpr float kLog2e = 1.4426950408889634f;
static_assert(kStages >= 2 && kPartition % (kTile * kWarps) == 0);

// Float8 KV: a stage holds the tile as loaded (1 byte an element), more
// stages deep so that as many bytes are in flight; the warp widens V to fp16
// into one swizzled tile of its own (K's fragments are widened in registers).
template <bool kFp8>
struct shared_layout {
  static constexpr int stages = kFp8 ? KVTIER_DECODE_FP8_STAGES : kStages;
  static constexpr int raw_stage_bytes = kFp8 ? kStageBytes / 2 : kStageBytes;
  static constexpr size_t warp_bytes = size_t{stages} * raw_stage_bytes + (kFp8 ? kTileBytes : 0);
  static constexpr size_t rings = 0;                                     // [kWarps][stages][K, V tile] (+ widened V)
  static constexpr size_t entries = rings + size_t{kWarps} * warp_bytes; // int32 [bytes_for(...)]
  // A partition of `tokens` spans at most tokens / block_tokens + 2 blocks.
  static constexpr size_t bytes_for(int tokens, int block_tokens) {
    return entries + (size_t(tokens / block_tokens) + 2) * sizeof(int32_t);
  }
  static constexpr size_t max_bytes = entries + (kPartition + 2) * sizeof(int32_t);
  // After the last tile the rings hold the warps' results instead:
  static constexpr size_t warp_out = 0;                                            // float [kWarps][8][128]
  static constexpr size_t warp_max = warp_out + size_t{kWarps} * 8 * kHeadDim * 4; // float [kWarps][8]
  static constexpr size_t warp_sum = warp_max + size_t{kWarps} * 8 * 4;            // float [kWarps][8]
  static_assert(warp_sum + size_t{kWarps} * 8 * 4 <= entries);
};

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ inline void copy_async16(void* shared, const void* global, bool valid) {
  const int bytes = valid ? 16 : 0; // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)), "l"(global),
               "r"(bytes));
}
__device__ inline void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kRingStages>
__device__ inline void wait_oldest_in_flight() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kRingStages - 2));
}
__device__ inline void wait_all_copies() {
  asm volatile("cp.async.wait_group 0;\n" ::);
}
__device__ inline void load_matrices(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ inline void load_matrices_transposed(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
// c (16x8, float) += a (16x16, row) . b (16x8, col), bf16 or (float8 KV,
// widened exactly) fp16; a's rows 8..15 are zero here (a1 = a3 = 0).
template <bool kFp16>
__device__ inline void mma(float (&c)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  if constexpr (kFp16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}
template <bool kFp16>
__device__ inline uint32_t pack(float lo, float hi) {
  if constexpr (kFp16) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}
// Four e4m3 values to four fp16 (exact: e4m3 is a subset of fp16).
__device__ inline uint2 widen4(uint32_t fp8x4) {
  const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(fp8x4 & 0xffffu), __NV_E4M3);
  const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(fp8x4 >> 16), __NV_E4M3);
  return make_uint2(uint32_t(lo.x) | uint32_t(lo.y) << 16, uint32_t(hi.x) | uint32_t(hi.y) << 16);
}
// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile.
__device__ inline int swizzled(int row, int chunk) {
  return (row * kChunks + (chunk ^ (row & 7))) * 16;
}

template <bool kFp8>
__global__ void __launch_bounds__(kThreads, KVTIER_DECODE_MIN_BLOCKS)
    partition_kernel(paged_decode_args a, int partition_tokens, int partitions, float* partial_ml, float* partial_out) {
  using layout = shared_layout<kFp8>;
  constexpr int kRing = layout::stages;
  constexpr int kElement = kFp8 ? 1 : 2;                     // bytes per K or V element in the pool
  constexpr int kRawTileBytes = kTile * kHeadDim * kElement; // a tile as loaded
  constexpr int kRawChunks = kHeadDim * kElement / 16;       // 16-byte chunks per row as loaded
  extern __shared__ __align__(128) unsigned char smem[];
  const int part = blockIdx.x, kv_head = blockIdx.y, b = blockIdx.z;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = a.q_heads / a.kv_heads;
  const int context = a.positions ? int(a.positions[b] + 1) : a.context_lens[b];
  const int begin = part * partition_tokens;
  const int count = min(context, begin + partition_tokens) - begin;
  const int first_head = kv_head * group;
  const uint64_t record = (uint64_t(b) * a.q_heads + first_head) * partitions + part;
  if (count <= 0) {
    if (tid < group) {
      partial_ml[2 * (record + uint64_t(tid) * partitions)] = -FLT_MAX;
      partial_ml[2 * (record + uint64_t(tid) * partitions) + 1] = 0.f;
    }
    return;
  }

  // The partition's block-table entries, staged once for every warp.
  const int bt = a.block_tokens;
  const int32_t* table = a.block_tables + (a.table_begin ? uint64_t(a.table_begin[b]) : uint64_t(b) * a.max_blocks);
  const int first_block = begin / bt;
  const int entry_count = (begin + count - 1) / bt - first_block + 1;
  auto* entries = reinterpret_cast<int32_t*>(smem + layout::entries);
  for (int i = tid; i < entry_count; i += kThreads)
    entries[i] = table[first_block + i];
  __syncthreads();

  const char* pool = static_cast<const char*>(a.pool) + a.layer_offset;
  const char* staged = static_cast<const char*>(a.staged);
  const uint64_t head_bytes = uint64_t(kv_head) * bt * kHeadDim * kElement;
  const uint64_t value_bytes = uint64_t(a.kv_heads) * bt * kHeadDim * kElement;
  // A streamed block's layer slice sits in the staging area, not the pool.
  auto key_row = [&](int token) {
    const int absolute = begin + token;
    const int block = absolute / bt;
    const uint32_t entry = uint32_t(entries[block - first_block]);
    const char* slice = entry >= a.staged_from ? staged + uint64_t(entry - a.staged_from) * a.slot_stride
                                               : pool + uint64_t(entry) * a.slot_stride;
    return slice + head_bytes + uint64_t(absolute - block * bt) * kHeadDim * kElement;
  };

  const int tiles = (count + kTile - 1) / kTile;
  const int my_tiles = tiles > warp ? (tiles - warp + kWarps - 1) / kWarps : 0;
  unsigned char* ring = smem + layout::rings + size_t(warp) * layout::warp_bytes;
  unsigned char* widened = ring + kRing * layout::raw_stage_bytes; // float8 KV only: V in fp16
  // Gathers this warp's i-th tile (partition tile warp + i * kWarps) into its
  // ring; rows past the context are zero-filled so that zero probabilities
  // meet zero values. A lane copies chunk lane % kRawChunks of every
  // (32 / kRawChunks)-th row. 16-bit rows are swizzled for ldmatrix; float8
  // rows (8 chunks) swap halves on odd rows, so that the two rows one 8-lane
  // phase of a 16-byte read touches (below) fall in distinct banks.
  const int chunk = lane % kRawChunks;
  auto raw_at = [&](int row, int c) {
    return kFp8 ? (row * kRawChunks + (c ^ ((row & 1) << 2))) * 16 : swizzled(row, c);
  };
  const bool tile_in_one_block = bt % kTile == 0; // tiles start at multiples of kTile
  auto load_tile = [&](int i) {
    const int first = (warp + i * kWarps) * kTile;
    unsigned char* stage = ring + (i % kRing) * layout::raw_stage_bytes;
    const char* rows = tile_in_one_block ? key_row(first) : nullptr;
    constexpr int kRowsAtOnce = 32 / kRawChunks;
#pragma unroll
    for (int j = 0; j < kTile / kRowsAtOnce; ++j) {
      const int r = kRowsAtOnce * j + lane / kRawChunks;
      const bool valid = first + r < count;
      const char* row = !valid ? pool : tile_in_one_block ? rows + r * kHeadDim * kElement : key_row(first + r);
      copy_async16(stage + raw_at(r, chunk), row + chunk * 16, valid);
      copy_async16(stage + kRawTileBytes + raw_at(r, chunk), row + (valid ? value_bytes : 0) + chunk * 16, valid);
    }
  };
  for (int i = 0; i < kRing - 1; ++i) {
    if (i < my_tiles)
      load_tile(i);
    commit_copies();
  }

  // Queries as A fragments: row lane / 4 (a head of the group, zero past
  // it), k-step k's dims k * 16 + lane % 4 * 2 (+1) and the same + 8. A dot
  // product is the same in any order of its dims, so for float8 K the k-steps
  // take them in the order one 16-byte read of a K row holds: k-step
  // 4 * J + j is dims 64 * J + 16 * (lane % 4) + 4 * j + (0..3) for this lane.
  const int row = lane / 4, pair = lane % 4 * 2, quad = lane % 4;
  uint32_t q[kHeadDim / 16][2];
#pragma unroll
  for (int k = 0; k < kHeadDim / 16; ++k)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int d = kFp8 ? (k / 4) * 64 + quad * 16 + (k % 4) * 4 + h * 2 : k * 16 + h * 8 + pair;
      float x = 0.f, y = 0.f;
      if (row < group) {
        const uint64_t at = (uint64_t(b) * a.q_heads + first_head + row) * kHeadDim + d;
        if (a.q_f32) {
          x = a.q_f32[at];
          y = a.q_f32[at + 1];
        } else {
          const auto* qb = static_cast<const bf16*>(a.q);
          x = __bfloat162float(qb[at]);
          y = __bfloat162float(qb[at + 1]);
        }
      }
      q[k][h] = pack<kFp8>(x, y);
    }

  const float scale_log2 = a.scale * kLog2e * (kFp8 ? a.k_scale : 1.f);
  float running_max = -FLT_MAX, running_sum = 0.f; // head `row`; the sum is this lane's share
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int n = 0; n < kHeadDim / 8; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  const int matrix = lane / 8, matrix_row = lane % 8;

  for (int i = 0; i < my_tiles; ++i) {
    wait_oldest_in_flight<kRing>();
    __syncwarp();
    // The buffer refilled now was consumed in the previous step.
    if (i + kRing - 1 < my_tiles)
      load_tile(i + kRing - 1);
    commit_copies();
    const unsigned char* keys = ring + (i % kRing) * layout::raw_stage_bytes;
    const unsigned char* values = keys + kRawTileBytes;
    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    if constexpr (kFp8) {
      // Widen V to fp16, swizzled for ldmatrix .trans: a lane takes half a
      // row (64 values), 16 values per 16-byte read.
      const int r = lane / 2;
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const uint4 raw = *reinterpret_cast<const uint4*>(values + raw_at(r, (lane % 2) * 4 + c));
        const uint2 w0 = widen4(raw.x), w1 = widen4(raw.y), w2 = widen4(raw.z), w3 = widen4(raw.w);
        const int out_chunk = (lane % 2) * 8 + c * 2;
        *reinterpret_cast<uint4*>(widened + swizzled(r, out_chunk)) = make_uint4(w0.x, w0.y, w1.x, w1.y);
        *reinterpret_cast<uint4*>(widened + swizzled(r, out_chunk + 1)) = make_uint4(w2.x, w2.y, w3.x, w3.y);
      }
      // S = Q K^T: token row n * 8 + lane / 4 read as two 16-byte chunks,
      // each 32-bit word four dims of one k-step, widened in registers.
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const int r_k = n * 8 + lane / 4;
        const uint4 lo = *reinterpret_cast<const uint4*>(keys + raw_at(r_k, quad));
        const uint4 hi = *reinterpret_cast<const uint4*>(keys + raw_at(r_k, 4 + quad));
        const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int k = 0; k < kHeadDim / 16; ++k) {
          const uint2 w = widen4(words[k]);
          mma<true>(s[n], q[k][0], q[k][1], w.x, w.y);
        }
      }
      __syncwarp();
      values = widened;
    } else {
      // S = Q K^T over the tile's 16 tokens (two n-tiles of 8).
#pragma unroll
      for (int k = 0; k < kHeadDim / 16; ++k) {
        uint32_t kf[4]; // tokens 0-7 dims lo, hi; tokens 8-15 dims lo, hi
        load_matrices(kf, keys + swizzled((matrix / 2) * 8 + matrix_row, k * 2 + matrix % 2));
        mma<false>(s[0], q[k][0], q[k][1], kf[0], kf[1]);
        mma<false>(s[1], q[k][0], q[k][1], kf[2], kf[3]);
      }
    }

    // Online softmax for head `row` over tokens n * 8 + pair (+1).
    const int first = (warp + i * kWarps) * kTile;
    float tile_max = -INFINITY;
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const bool valid = first + n * 8 + pair + j < count;
        s[n][j] = valid ? s[n][j] * scale_log2 : -INFINITY;
        tile_max = fmaxf(tile_max, s[n][j]);
      }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
    const float new_max = fmaxf(running_max, tile_max);
    const float correction = exp2f(running_max - new_max);
    running_max = new_max;
    float p[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int j = 0; j < 2; ++j)
        p[n][j] = exp2f(s[n][j] - new_max);
    running_sum = running_sum * correction + (p[0][0] + p[0][1] + p[1][0] + p[1][1]);
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[n][0] *= correction;
      o[n][1] *= correction;
    }

    // O += P V: P's A fragment is S's accumulator (tokens 0-7, then 8-15).
    const uint32_t p_lo = pack<kFp8>(p[0][0], p[0][1]), p_hi = pack<kFp8>(p[1][0], p[1][1]);
#pragma unroll
    for (int d = 0; d < kHeadDim / 16; ++d) {
      uint32_t vf[4]; // dims d*16..+7: tokens 0-7, 8-15; dims +8..+15: tokens 0-7, 8-15
      load_matrices_transposed(vf, values + swizzled((matrix % 2) * 8 + matrix_row, d * 2 + matrix / 2));
      mma<kFp8>(o[2 * d], p_lo, p_hi, vf[0], vf[1]);
      mma<kFp8>(o[2 * d + 1], p_lo, p_hi, vf[2], vf[3]);
    }
  }

  // Merge the warps: this lane holds head `row`'s max, a quarter of its sum,
  // and dims n * 8 + pair (+1) of its output.
  running_sum += __shfl_xor_sync(0xffffffffu, running_sum, 1);
  running_sum += __shfl_xor_sync(0xffffffffu, running_sum, 2);
  wait_all_copies();
  __syncthreads(); // every ring is spent
  auto* warp_out = reinterpret_cast<float*>(smem + layout::warp_out);
  auto* warp_max = reinterpret_cast<float*>(smem + layout::warp_max);
  auto* warp_sum = reinterpret_cast<float*>(smem + layout::warp_sum);
  if (row < group) {
    if (lane % 4 == 0) {
      warp_max[warp * 8 + row] = running_max;
      warp_sum[warp * 8 + row] = running_sum;
    }
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      warp_out[(warp * 8 + row) * kHeadDim + n * 8 + pair] = o[n][0];
      warp_out[(warp * 8 + row) * kHeadDim + n * 8 + pair + 1] = o[n][1];
    }
  }
  __syncthreads();
  for (int e = tid; e < group * kHeadDim; e += kThreads) {
    const int g = e / kHeadDim, d = e % kHeadDim;
    float m = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w)
      m = fmaxf(m, warp_max[w * 8 + g]);
    float sum = 0.f, out = 0.f;
    for (int w = 0; w < kWarps; ++w) {
      const float weight = exp2f(warp_max[w * 8 + g] - m); // 0 for a warp that had no tile
      sum += warp_sum[w * 8 + g] * weight;
      out += warp_out[(w * 8 + g) * kHeadDim + d] * weight;
    }
    if constexpr (kFp8)
      out *= a.v_scale;
    // One partition holds the whole context: the answer, no merge needed.
    if (partitions == 1) {
      static_cast<bf16*>(a.out)[(uint64_t(b) * a.q_heads + first_head + g) * kHeadDim + d] =
          __float2bfloat16(out / sum);
      continue;
    }
    const uint64_t r = record + uint64_t(g) * partitions;
    partial_out[r * kHeadDim + d] = out;
    if (d == 0) {
      partial_ml[2 * r] = m / kLog2e; // the merge works in natural exponents
      partial_ml[2 * r + 1] = sum;
    }
  }
}

// Tokens per partition: long partitions amortize each block's pipeline fill
// and its merge record, but a small batch needs short ones to fill the GPU
// (about two blocks per multiprocessor).
int partition_tokens_for(const paged_decode_args& a, int multiprocessors) {
  constexpr int kStep = kTile * kWarps; // every warp gets a tile
  const int per_context = std::max(1, 2 * multiprocessors / std::max(1, a.batch * a.kv_heads));
  const int tokens = (a.max_context + per_context - 1) / per_context;
  return std::clamp((tokens + kStep - 1) / kStep * kStep, kStep, kPartition);
}

template <bool kFp8>
cudaError_t launch_partitions(const paged_decode_args& a, int tokens, int partitions, float* ml, float* out,
                              cudaStream_t s) {
  const size_t shared = shared_layout<kFp8>::bytes_for(tokens, a.block_tokens);
  cudaError_t e = cudaFuncSetAttribute(partition_kernel<kFp8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       int(shared_layout<kFp8>::max_bytes));
  if (e == cudaSuccess)
    partition_kernel<kFp8>
        <<<dim3(partitions, a.kv_heads, a.batch), kThreads, shared, s>>>(a, tokens, partitions, ml, out);
  return e;
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
  cudaError_t e = a.kv_fp8 ? launch_partitions<true>(a, tokens, partitions, ml, out, s)
                           : launch_partitions<false>(a, tokens, partitions, ml, out, s);
  if (e != cudaSuccess)
    return int(e);
  if ((e = cudaGetLastError()) != cudaSuccess)
    return int(e);
  return partitions == 1 ? 0 : merge_partitions(a, partitions, ml, out, s);
}

} // namespace kvtier::model::cuda
