// Chunked-prefill attention on tensor cores (contract in paged_prefill.hpp):
// the mma.sync kernel, and the dispatch that launches the Hopper one
// (paged_prefill_wgmma.cu) instead on compute capability 9.x where built.
//
// Grid (tiles, kv_heads, splits), kWarps warps; a block's M = kWarps * kWarpRows
// query rows, row i being token i / group and head i % group of the tile.
// Each warp owns kWarpRows rows (kWarpTiles tiles of 16) and keeps, in the
// mma.sync register layout (m16n8k16, bf16 in, float accumulate):
//   S = Q K^T over the kKv KV tokens of the current tile,
//   O (16 x 128 a tile, 16 n-tiles) and each row's running max and sum;
// every K or V fragment read from shared memory feeds all its tiles, which
// halves the shared-memory reads per product against one tile a warp.
// The accumulator layout of S is the A layout of the next product, so the
// probabilities go from S to P V without touching shared memory (FlashAttention
// 2's register reuse). Queries and K rows are read as stored ([row][dim]); V
// rows are transposed on load (ldmatrix .trans).
// With splits > 1, block z of (tile, KV head) sweeps KV tiles
// [z * share, (z + 1) * share) of the tile's context and writes a partial
// record per row; merge_partitions (paged_decode.cu) combines them.
#include "kernels/model/cuda/paged_decode_merge.hpp"
#include "kernels/model/cuda/paged_prefill.hpp"
#ifdef KVTIER_PREFILL_WGMMA
#include "kernels/model/cuda/paged_prefill_wgmma.hpp"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

namespace kvtier::model::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kHeadDim = 128;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kKv = 64;           // KV tokens per shared-memory tile, a multiple of 16
constexpr int kLd = kHeadDim + 8; // padded row: ldmatrix's 8 rows land in distinct banks
constexpr int kChunksPerRow = kHeadDim * 2 / 16;
constexpr float kLog2e = 1.4426950408889634f;
// kWarpTiles 16-row tiles per warp: each K/V fragment read feeds that many.
// Measured on the H200 (8 warps, bench/model/NOTES.md): two tiles (256 rows a
// block, one block per SM at 255 registers) run 8k-token chunks fastest; one
// tile capped at 128 registers (two blocks per SM, so one block's softmax
// overlaps the other's products) runs 2k-token chunks 1.2x faster than one
// tile uncapped, which in turn wins where the step has fewer blocks than SMs
// (a capped block would share its SM while other SMs idle).
template <int kWarpTiles>
struct shared_layout {
  static constexpr int rows = kWarps * 16 * kWarpTiles;
  static constexpr size_t queries = 0;                                  // bf16 [rows][kLd]
  static constexpr size_t keys = queries + rows * kLd * sizeof(bf16);   // bf16 [2][kKv][kLd]
  static constexpr size_t values = keys + 2 * kKv * kLd * sizeof(bf16); // bf16 [2][kKv][kLd]
  static constexpr size_t bytes = values + 2 * kKv * kLd * sizeof(bf16);
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
__device__ inline void wait_all_but_newest() {
  asm volatile("cp.async.wait_group 1;\n" ::);
}
__device__ inline void load_matrices(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ inline void load_matrices_transposed(uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
// c (16x8, float) += a (16x16, bf16, row) . b (16x8, bf16, col).
__device__ inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ inline uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

template <int kWarpTiles, int kBlocksPerSm>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) prefill_kernel(paged_prefill_args a) {
  using layout = shared_layout<kWarpTiles>;
  constexpr int kWarpRows = 16 * kWarpTiles, kRows = layout::rows;
  extern __shared__ __align__(128) unsigned char smem[];
  auto* queries = reinterpret_cast<bf16*>(smem + layout::queries);
  auto* keys = reinterpret_cast<bf16*>(smem + layout::keys);
  auto* values = reinterpret_cast<bf16*>(smem + layout::values);

  // The heaviest tiles (latest positions) first: they bound the step.
  const int tile = a.tiles - 1 - int(blockIdx.x), kv_head = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int group = a.q_heads / a.kv_heads;
  const uint32_t first_row = a.tile_rows[2 * tile], count = a.tile_rows[2 * tile + 1];
  // Positions fit 32 bits (a context of 2^31 tokens is beyond any pool).
  const int first_position = int(a.positions[first_row]);
  const int kv_len = int(a.positions[first_row + count - 1]) + 1;
  const int kv_tiles = (kv_len + kKv - 1) / kKv;
  const uint32_t* table = a.tables + a.table_begin[first_row];
  // This block's share of the context, in KV tiles.
  const int share = (kv_tiles + a.splits - 1) / a.splits;
  const int t_begin = int(blockIdx.z) * share, t_end = min(kv_tiles, t_begin + share);
  // Record of (row i of this block, this split) in the workspace.
  auto record = [&](int i) {
    const uint32_t token = i / group;
    return ((uint64_t(first_row + token - a.first_row) * a.q_heads) + kv_head * group + i % group) * a.splits +
        blockIdx.z;
  };
  if (t_begin >= t_end) { // a share past this tile's context: empty records
    for (int i = tid; i < kRows; i += kThreads)
      if (uint32_t(i / group) < count) {
        a.workspace[2 * record(i)] = -FLT_MAX;
        a.workspace[2 * record(i) + 1] = 0.f;
      }
    return;
  }

  // Queries to bf16 in shared memory; rows past the tile are zeros.
  for (int i = tid; i < kRows * kHeadDim / 4; i += kThreads) {
    const int row = i / (kHeadDim / 4), d = i % (kHeadDim / 4) * 4;
    const uint32_t token = row / group;
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (token < count)
      v = *reinterpret_cast<const float4*>(
          a.q + (uint64_t(first_row + token) * a.q_heads + kv_head * group + row % group) * kHeadDim + d);
    auto* to = reinterpret_cast<__nv_bfloat162*>(queries + row * kLd + d);
    to[0] = __floats2bfloat162_rn(v.x, v.y);
    to[1] = __floats2bfloat162_rn(v.z, v.w);
  }

  const char* pool = static_cast<const char*>(a.pool);
  const uint64_t head_bytes = uint64_t(kv_head) * a.block_tokens * kHeadDim * 2;
  const uint64_t value_bytes = uint64_t(a.kv_heads) * a.block_tokens * kHeadDim * 2;
  // Gathers KV tile `t` into buffer t % 2 (one commit group); rows past the
  // sequence are zero-filled so that zero probabilities meet zero values.
  auto load_tile = [&](int t) {
    bf16* k = keys + (t % 2) * kKv * kLd;
    bf16* v = values + (t % 2) * kKv * kLd;
    const int chunk = tid % kChunksPerRow;
    for (int row = tid / kChunksPerRow; row < kKv; row += kThreads / kChunksPerRow) {
      const int token = t * kKv + row;
      const bool valid = token < kv_len;
      const char* src = pool;
      if (valid) {
        const int block = token / a.block_tokens;
        const uint32_t entry = table[block];
        // A streamed block's layer slice sits in the staging area, not the pool.
        src = (entry >= a.staged_from
                   ? static_cast<const char*>(a.staged) + uint64_t(entry - a.staged_from) * a.slot_stride
                   : pool + a.layer_offset + uint64_t(entry) * a.slot_stride) +
            head_bytes + uint64_t(token - block * a.block_tokens) * kHeadDim * 2 + chunk * 16;
      }
      copy_async16(k + row * kLd + chunk * 8, src, valid);
      copy_async16(v + row * kLd + chunk * 8, valid ? src + value_bytes : pool, valid);
    }
    commit_copies();
  };
  load_tile(t_begin);
  __syncthreads(); // queries stored

  // This thread's rows within the block: for each of its warp's 16-row
  // tiles, rows quad and quad + 8.
  const int quad = lane / 4, pair = lane % 4 * 2, m = lane / 8, r = lane % 8;
  const int last_position = kv_len - 1;
  int position[kWarpTiles][2];
#pragma unroll
  for (int w = 0; w < kWarpTiles; ++w)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t token = (warp * kWarpRows + w * 16 + h * 8 + quad) / group;
      position[w][h] = token < count ? first_position + int(token) : last_position;
    }
  const bf16* my_queries = queries + warp * kWarpRows * kLd;

  float o[kWarpTiles][kHeadDim / 8][4];
  float row_max[kWarpTiles][2], row_sum[kWarpTiles][2];
#pragma unroll
  for (int w = 0; w < kWarpTiles; ++w) {
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      o[w][n][0] = o[w][n][1] = o[w][n][2] = o[w][n][3] = 0.f;
    row_max[w][0] = row_max[w][1] = -INFINITY;
    row_sum[w][0] = row_sum[w][1] = 0.f;
  }
  const float scale_log2 = a.scale * kLog2e;

  for (int t = t_begin; t < t_end; ++t) {
    if (t + 1 < t_end)
      load_tile(t + 1);
    else
      commit_copies(); // an empty group keeps the wait below counting right
    wait_all_but_newest();
    __syncthreads();
    const bf16* k_tile = keys + (t % 2) * kKv * kLd;
    const bf16* v_tile = values + (t % 2) * kKv * kLd;

    // S = Q K^T: each K fragment feeds every 16-row tile of the warp.
    float s[kWarpTiles][kKv / 8][4];
#pragma unroll
    for (int w = 0; w < kWarpTiles; ++w)
#pragma unroll
      for (int n = 0; n < kKv / 8; ++n)
        s[w][n][0] = s[w][n][1] = s[w][n][2] = s[w][n][3] = 0.f;
#pragma unroll
    for (int k = 0; k < kHeadDim / 16; ++k) {
      uint32_t q[kWarpTiles][4];
#pragma unroll
      for (int w = 0; w < kWarpTiles; ++w)
        load_matrices(q[w], my_queries + (w * 16 + (m % 2) * 8 + r) * kLd + k * 16 + (m / 2) * 8);
#pragma unroll
      for (int n2 = 0; n2 < kKv / 16; ++n2) {
        uint32_t b[4];
        load_matrices(b, k_tile + (n2 * 16 + (m / 2) * 8 + r) * kLd + k * 16 + (m % 2) * 8);
#pragma unroll
        for (int w = 0; w < kWarpTiles; ++w) {
          mma(s[w][2 * n2], q[w], b[0], b[1]);
          mma(s[w][2 * n2 + 1], q[w], b[2], b[3]);
        }
      }
    }

    // Scale to log2 units, mask the future (only the last tiles reach it),
    // and fold the tile into each row's running max and sum.
    const int tile_first = t * kKv;
    const bool masking = tile_first + kKv - 1 > first_position;
#pragma unroll
    for (int w = 0; w < kWarpTiles; ++w) {
      float tile_max[2] = {row_max[w][0], row_max[w][1]};
#pragma unroll
      for (int n = 0; n < kKv / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[w][n][e] * scale_log2;
          if (masking && tile_first + n * 8 + pair + (e % 2) > position[w][e / 2])
            x = -INFINITY;
          s[w][n][e] = x;
          tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
        }
      float rescale[2], base[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        // Unsplit, position 0 is visible to every row, so the maximum is
        // finite from the first tile on; a split's share may lie wholly in a
        // row's future, and a row that has seen nothing keeps sum and output 0.
        base[h] = tile_max[h] == -INFINITY ? 0.f : tile_max[h];
        rescale[h] = exp2f(row_max[w][h] - base[h]);
        row_max[w][h] = tile_max[h];
        row_sum[w][h] *= rescale[h];
      }
#pragma unroll
      for (int n = 0; n < kKv / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float p = exp2f(s[w][n][e] - base[e / 2]);
          s[w][n][e] = p;
          row_sum[w][e / 2] += p;
        }
#pragma unroll
      for (int n = 0; n < kHeadDim / 8; ++n) {
        o[w][n][0] *= rescale[0];
        o[w][n][1] *= rescale[0];
        o[w][n][2] *= rescale[1];
        o[w][n][3] *= rescale[1];
      }
    }

    // O += P V: the accumulator layout of S is the A layout of this product.
#pragma unroll
    for (int k = 0; k < kKv / 16; ++k) {
      uint32_t p[kWarpTiles][4];
#pragma unroll
      for (int w = 0; w < kWarpTiles; ++w) {
        p[w][0] = pack(s[w][2 * k][0], s[w][2 * k][1]);
        p[w][1] = pack(s[w][2 * k][2], s[w][2 * k][3]);
        p[w][2] = pack(s[w][2 * k + 1][0], s[w][2 * k + 1][1]);
        p[w][3] = pack(s[w][2 * k + 1][2], s[w][2 * k + 1][3]);
      }
#pragma unroll
      for (int d2 = 0; d2 < kHeadDim / 16; ++d2) {
        uint32_t b[4];
        load_matrices_transposed(b, v_tile + (k * 16 + (m % 2) * 8 + r) * kLd + d2 * 16 + (m / 2) * 8);
#pragma unroll
        for (int w = 0; w < kWarpTiles; ++w) {
          mma(o[w][2 * d2], p[w], b[0], b[1]);
          mma(o[w][2 * d2 + 1], p[w], b[2], b[3]);
        }
      }
    }
    __syncthreads(); // buffer t % 2 is refilled by the next iteration's load
  }

  auto* out = static_cast<__nv_bfloat162*>(a.out);
#pragma unroll
  for (int w = 0; w < kWarpTiles; ++w)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = row_sum[w][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int row = warp * kWarpRows + w * 16 + h * 8 + quad;
      const uint32_t token = row / group;
      if (token >= count)
        continue;
      if (a.splits > 1) {
        const uint64_t r = record(row);
        auto* partial =
            reinterpret_cast<float2*>(a.workspace + 2 * uint64_t(a.rows) * a.q_heads * a.splits + r * kHeadDim);
#pragma unroll
        for (int n = 0; n < kHeadDim / 8; ++n)
          partial[(n * 8 + pair) / 2] = make_float2(o[w][n][2 * h], o[w][n][2 * h + 1]);
        if (pair == 0) {
          // The merge works in natural exponents; a row that saw nothing has sum 0.
          a.workspace[2 * r] = sum == 0.f ? -FLT_MAX : row_max[w][h] / kLog2e;
          a.workspace[2 * r + 1] = sum;
        }
        continue;
      }
      const float inverse = 1.f / sum;
      const uint64_t base = (uint64_t(first_row + token) * a.q_heads + kv_head * group + row % group) * kHeadDim;
#pragma unroll
      for (int n = 0; n < kHeadDim / 8; ++n)
        out[(base + n * 8 + pair) / 2] = __floats2bfloat162_rn(o[w][n][2 * h] * inverse, o[w][n][2 * h + 1] * inverse);
    }
}

} // namespace

namespace {

// The fewest splits that fill `slots` with the last wave at least 85% full,
// each block sweeping at least 8 KV tiles; 1 when the tiles alone fill them.
int splits_for(int64_t blocks, int64_t slots, int64_t longest_context) {
  const int64_t most = std::max<int64_t>(1, (longest_context + 8 * kKv - 1) / (8 * kKv));
  if (blocks >= slots)
    return 1;
  for (int64_t splits = 2; splits <= most; ++splits) {
    const int64_t launched = blocks * splits, waves = (launched + slots - 1) / slots;
    if (launched >= slots && launched * 100 >= 85 * waves * slots)
      return int(splits);
  }
  return int(most);
}

// Blocks a (wide or narrow) instance runs on one SM at once.
int64_t slots_for(int tile_rows, int multiprocessors) {
  return (tile_rows == shared_layout<2>::rows ? 1 : 2) * int64_t{multiprocessors};
}

} // namespace

int paged_prefill_tile_tokens(int group, int64_t rows, int kv_heads, int64_t longest_context, int multiprocessors) {
  if (group < 1)
    return 0;
  // Wide tiles read half the shared memory per product (each K/V fragment
  // feeds two row tiles) but run one block per SM. They win where the grid
  // has four blocks per SM, and where each block's sweep stays long once the
  // context is split to fill the GPU: measured on the H200, 2048 tokens after
  // 32k / 64k 1.10x faster wide (256 blocks, unsplit), 512 after 32k / 64k
  // 1.07x (split); 512 after 8k (sweeps of ~2k positions) 1.06x slower.
  const int64_t wide_tiles = (rows * group + shared_layout<2>::rows - 1) / shared_layout<2>::rows;
  const int64_t wide_blocks = wide_tiles * kv_heads;
  const int splits = splits_for(wide_blocks, slots_for(shared_layout<2>::rows, multiprocessors), longest_context);
  const bool wide = wide_blocks >= 4 * int64_t{multiprocessors} || longest_context / splits >= 8192;
  return (wide ? shared_layout<2>::rows : shared_layout<1>::rows) / group;
}

int paged_prefill_splits(int tiles, int kv_heads, int tile_tokens, int group, int64_t longest_context,
                         int multiprocessors) {
  // Narrow tiles run two blocks per SM (the <1, 2> instance) once the grid
  // has that many, one per SM below: a 512-token chunk after 32k split 2
  // ways (256 blocks, one per SM) ran no faster than unsplit, 5 ways (640
  // blocks, 2.4 waves of two per SM) 1.11x faster. Wide tiles run one per SM.
  const int64_t blocks = int64_t{std::max(tiles, 1)} * std::max(kv_heads, 1);
  return splits_for(blocks, slots_for(tile_tokens * group, multiprocessors), longest_context);
}

uint64_t paged_prefill_workspace_floats(uint32_t rows, int q_heads, int splits) {
  return splits > 1 ? uint64_t(rows) * q_heads * splits * (2 + kHeadDim) : 0;
}

std::string paged_prefill_check_args(const paged_prefill_args& a) {
  if (a.head_dim != kHeadDim)
    return "head_dim " + std::to_string(a.head_dim) + " (the kernel has 128)";
  if (a.kv_heads < 1 || a.q_heads % a.kv_heads != 0)
    return "q_heads " + std::to_string(a.q_heads) + " is not a multiple of kv_heads " + std::to_string(a.kv_heads);
  const int group = a.q_heads / a.kv_heads;
  if (group != 1 && group != 2 && group != 4 && group != 8)
    return "query group " + std::to_string(group) + " (the kernel has 1, 2, 4, 8)";
  if (a.tiles < 1 || a.block_tokens < 1)
    return "tiles and block_tokens must be >= 1";
  if (a.tile_tokens * group != shared_layout<1>::rows && a.tile_tokens * group != shared_layout<2>::rows)
    return "tile_tokens " + std::to_string(a.tile_tokens) + " is not one paged_prefill_tile_tokens gives";
  if (!a.q || !a.out || !a.pool || !a.tables || !a.table_begin || !a.positions || !a.tile_rows)
    return "a device pointer is null";
  if (a.splits < 1)
    return "splits " + std::to_string(a.splits) + " (at least 1)";
  if (a.splits > 1 && (!a.workspace || a.rows < 1))
    return "a split launch needs a workspace and the rows its tiles cover";
  return {};
}

bool paged_prefill_has_wgmma() {
#ifdef KVTIER_PREFILL_WGMMA
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess)
    return false;
  return major == 9;
#else
  return false;
#endif
}

int paged_prefill_attention_tc(const paged_prefill_args& a, void* stream) {
  int e = 0;
  const bool wgmma = a.instruction == paged_prefill_instruction::wgmma ||
      (a.instruction == paged_prefill_instruction::automatic && paged_prefill_has_wgmma());
  if (wgmma) {
#ifdef KVTIER_PREFILL_WGMMA
    if (!paged_prefill_has_wgmma())
      return int(cudaErrorNotSupported);
    e = paged_prefill_wgmma_launch(a, stream);
#else
    return int(cudaErrorNotSupported);
#endif
  } else {
    auto launch = [&](auto kernel, size_t shared) {
      cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
      if (error != cudaSuccess)
        return int(error);
      kernel<<<dim3(a.tiles, a.kv_heads, a.splits), kThreads, shared, static_cast<cudaStream_t>(stream)>>>(a);
      return int(cudaGetLastError());
    };
    const int group = a.q_heads / a.kv_heads;
    int device = 0, multiprocessors = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device);
    if (a.tile_tokens * group == shared_layout<2>::rows)
      e = launch(prefill_kernel<2, 1>, shared_layout<2>::bytes);
    else if (int64_t{a.tiles} * a.kv_heads * a.splits >= 2 * int64_t{multiprocessors})
      e = launch(prefill_kernel<1, 2>, shared_layout<1>::bytes);
    else
      e = launch(prefill_kernel<1, 1>, shared_layout<1>::bytes);
  }
  if (e != 0 || a.splits == 1)
    return e;
  paged_decode_args merge;
  merge.batch = int32_t(a.rows);
  merge.q_heads = a.q_heads;
  merge.out = static_cast<char*>(a.out) + uint64_t(a.first_row) * a.q_heads * kHeadDim * sizeof(bf16);
  return merge_partitions(merge, a.splits, a.workspace, a.workspace + 2 * uint64_t(a.rows) * a.q_heads * a.splits,
                          stream);
}

} // namespace kvtier::model::cuda
