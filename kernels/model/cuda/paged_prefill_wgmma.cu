// Chunked-prefill attention on Hopper warpgroup MMA (contract in
// paged_prefill.hpp; launched by paged_prefill_attention_tc on compute
// capability 9.x devices, see paged_prefill_wgmma.hpp).
//
// Grid (tiles, kv_heads, splits), kGroups warpgroups of 128 threads; a
// block's M = 64 * kGroups query rows, row i being token i / group and head
// i % group of the tile, warpgroup g owning rows [64 g, 64 g + 64). Per KV
// tile of kKv tokens each warpgroup runs
//   S = Q K^T  as 8 wgmma m64n64k16, both operands read from shared memory,
//   online softmax on S in registers (exp2 domain, as paged_prefill_tc.cu),
//   O += P V   as 4 wgmma m64n128k16, P from registers (bf16, rounded from
//              S's accumulator layout, which is wgmma's A register layout),
//              V from shared memory read N-major (the transpose bit).
// Q, K and V sit in shared memory in the 128-byte swizzled K-major layout
// the matrix descriptors name: each operand is two panels of 64 head
// dimensions, a panel [row][128 bytes] whose 16-byte chunk c of row r is
// stored at chunk c ^ (r % 8), each panel 1024-byte aligned (the swizzle is
// applied to address bits, so the pattern must start on an 8-row boundary).
// K is [token][dim] (K-major B for Q K^T); the same bytes read with the
// transpose bit are V as an N-major B for P V, so K and V are staged alike.
// K/V tiles are gathered from the paged pool by cp.async (each 16-token
// block is its own address), two tiles in flight, as the mma.sync kernel.
//
// The softmax of one warpgroup overlaps the products of the others: one
// wide block (4 warpgroups) or two narrow blocks (2 warpgroups each) fill an
// SM's 16 warps, each thread at most 128 registers.
// With splits > 1, block z sweeps KV tiles [z * share, (z + 1) * share) and
// writes partial records, exactly as paged_prefill_tc.cu.
#include "kernels/model/cuda/paged_prefill_wgmma.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

namespace kvtier::model::cuda {
namespace {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define KVTIER_WGMMA_BODY 1
#else
#define KVTIER_WGMMA_BODY 0
#endif

using bf16 = __nv_bfloat16;

constexpr int kHeadDim = 128;
constexpr int kKv = 64;                        // KV tokens per shared-memory tile
constexpr int kChunks = kHeadDim * 2 / 16;     // 16-byte chunks in a row
constexpr uint32_t kRowBytes = 128;            // a panel row: 64 head dimensions
constexpr uint32_t kAtomBytes = 8 * kRowBytes; // 8 swizzled rows
constexpr float kLog2e = 1.4426950408889634f;

template <int kGroups>
struct wgmma_layout {
  static constexpr int rows = 64 * kGroups;
  static constexpr uint32_t query_panel = rows * kRowBytes;
  static constexpr uint32_t kv_panel = kKv * kRowBytes;
  static constexpr uint32_t kv_tile = 2 * kv_panel; // both panels of one tile
  static constexpr uint32_t queries = 0;
  static constexpr uint32_t keys = queries + 2 * query_panel; // [2 buffers][2 panels][kKv][128 B]
  static constexpr uint32_t values = keys + 2 * kv_tile;
  static constexpr uint32_t used = values + 2 * kv_tile;
  static constexpr size_t bytes = used + 1024; // room to align the base to 1024
};

// Byte offset of 16-byte chunk `chunk` (0..15) of row `row` in a two-panel
// swizzled operand whose panels are `panel` bytes apart.
__device__ inline uint32_t swizzled(int row, int chunk, uint32_t panel) {
  return (chunk / 8) * panel + row * kRowBytes + (((chunk % 8) ^ (row % 8)) * 16);
}

// A 128-byte-swizzle matrix descriptor: start address, leading and stride
// byte offsets (16-byte units, 14 bits each), layout type 1 in bits 62-63.
__device__ inline uint64_t descriptor(uint32_t address, uint32_t leading, uint32_t stride) {
  return uint64_t((address & 0x3FFFF) >> 4) | (uint64_t(leading >> 4) << 16) | (uint64_t(stride >> 4) << 32) |
      (uint64_t(1) << 62);
}

__device__ inline uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ inline void copy_async16(uint32_t shared, const void* global, bool valid) {
  const int bytes = valid ? 16 : 0; // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global), "r"(bytes));
}
__device__ inline void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::);
}
__device__ inline void wait_all_but_newest() {
  asm volatile("cp.async.wait_group 1;\n" ::);
}
// Shared memory written through the generic proxy (st.shared, cp.async)
// becomes visible to the tensor cores' reads (the async proxy).
__device__ inline void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#if KVTIER_WGMMA_BODY
__device__ inline void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ inline void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ inline void wgmma_wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
// Keeps the compiler from moving reads or writes of an accumulator across
// the asynchronous product that owns it.
template <int N>
__device__ inline void pin(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(r[i])::"memory");
}
// Keeps a register operand (P) alive, unchanged, until the product reading
// it has completed.
template <int N>
__device__ inline void pin(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+r"(r[i])::"memory");
}
// s (64 x 64 per warpgroup) (+)= A (64 x 16, shared, K-major) . B (16 x 64, shared, K-major).
__device__ inline void wgmma_scores(float (&s)[32], uint64_t a, uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "%32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(s[0]), "+f"(s[1]), "+f"(s[2]), "+f"(s[3]), "+f"(s[4]), "+f"(s[5]), "+f"(s[6]), "+f"(s[7]), "+f"(s[8]),
        "+f"(s[9]), "+f"(s[10]), "+f"(s[11]), "+f"(s[12]), "+f"(s[13]), "+f"(s[14]), "+f"(s[15]), "+f"(s[16]),
        "+f"(s[17]), "+f"(s[18]), "+f"(s[19]), "+f"(s[20]), "+f"(s[21]), "+f"(s[22]), "+f"(s[23]), "+f"(s[24]),
        "+f"(s[25]), "+f"(s[26]), "+f"(s[27]), "+f"(s[28]), "+f"(s[29]), "+f"(s[30]), "+f"(s[31])
      : "l"(a), "l"(b), "r"(accumulate));
}
// o (64 x 128 per warpgroup) += A (64 x 16, registers) . B (16 x 128, shared, N-major: transposed).
__device__ inline void wgmma_values(float (&o)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, "
               "%11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, "
               "%31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, "
               "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
               "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
               : "+f"(o[0]), "+f"(o[1]), "+f"(o[2]), "+f"(o[3]), "+f"(o[4]), "+f"(o[5]), "+f"(o[6]), "+f"(o[7]),
                 "+f"(o[8]), "+f"(o[9]), "+f"(o[10]), "+f"(o[11]), "+f"(o[12]), "+f"(o[13]), "+f"(o[14]), "+f"(o[15]),
                 "+f"(o[16]), "+f"(o[17]), "+f"(o[18]), "+f"(o[19]), "+f"(o[20]), "+f"(o[21]), "+f"(o[22]), "+f"(o[23]),
                 "+f"(o[24]), "+f"(o[25]), "+f"(o[26]), "+f"(o[27]), "+f"(o[28]), "+f"(o[29]), "+f"(o[30]), "+f"(o[31]),
                 "+f"(o[32]), "+f"(o[33]), "+f"(o[34]), "+f"(o[35]), "+f"(o[36]), "+f"(o[37]), "+f"(o[38]), "+f"(o[39]),
                 "+f"(o[40]), "+f"(o[41]), "+f"(o[42]), "+f"(o[43]), "+f"(o[44]), "+f"(o[45]), "+f"(o[46]), "+f"(o[47]),
                 "+f"(o[48]), "+f"(o[49]), "+f"(o[50]), "+f"(o[51]), "+f"(o[52]), "+f"(o[53]), "+f"(o[54]), "+f"(o[55]),
                 "+f"(o[56]), "+f"(o[57]), "+f"(o[58]), "+f"(o[59]), "+f"(o[60]), "+f"(o[61]), "+f"(o[62]), "+f"(o[63])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}
#endif // KVTIER_WGMMA_BODY

__device__ inline uint32_t pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

template <int kGroups>
__global__ void __launch_bounds__(kGroups * 128, kGroups == 2 ? 2 : 1) prefill_wgmma_kernel(paged_prefill_args a) {
#if KVTIER_WGMMA_BODY
  using layout = wgmma_layout<kGroups>;
  constexpr int kRows = layout::rows, kThreads = kGroups * 128;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = shared_address(smem_raw);
  const uint32_t aligned = (raw + 1023) & ~1023u;
  unsigned char* smem = smem_raw + (aligned - raw);
  const uint32_t queries = aligned + layout::queries, keys = aligned + layout::keys, values = aligned + layout::values;

  // The heaviest tiles (latest positions) first: they bound the step.
  const int tile = a.tiles - 1 - int(blockIdx.x), kv_head = blockIdx.y;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, warpgroup = warp / 4;
  const int group = a.q_heads / a.kv_heads;
  const uint32_t first_row = a.tile_rows[2 * tile], count = a.tile_rows[2 * tile + 1];
  const int first_position = int(a.positions[first_row]);
  const int kv_len = int(a.positions[first_row + count - 1]) + 1;
  const int kv_tiles = (kv_len + kKv - 1) / kKv;
  const uint32_t* table = a.tables + a.table_begin[first_row];
  const int share = (kv_tiles + a.splits - 1) / a.splits;
  const int t_begin = int(blockIdx.z) * share, t_end = min(kv_tiles, t_begin + share);
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

  // Queries to bf16, swizzled; rows past the tile are zeros.
  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int row = i / kChunks, chunk = i % kChunks;
    const uint32_t token = row / group;
    uint4 packed = make_uint4(0, 0, 0, 0);
    if (token < count) {
      const float4* from = reinterpret_cast<const float4*>(
          a.q + (uint64_t(first_row + token) * a.q_heads + kv_head * group + row % group) * kHeadDim + chunk * 8);
      const float4 x = from[0], y = from[1];
      packed = make_uint4(pack(x.x, x.y), pack(x.z, x.w), pack(y.x, y.y), pack(y.z, y.w));
    }
    *reinterpret_cast<uint4*>(smem + layout::queries + swizzled(row, chunk, layout::query_panel)) = packed;
  }

  const char* pool = static_cast<const char*>(a.pool);
  const uint64_t head_bytes = uint64_t(kv_head) * a.block_tokens * kHeadDim * 2;
  const uint64_t value_bytes = uint64_t(a.kv_heads) * a.block_tokens * kHeadDim * 2;
  // Gathers KV tile `t` into buffer t % 2 (one commit group); rows past the
  // sequence are zero-filled so that zero probabilities meet zero values.
  auto load_tile = [&](int t) {
    const uint32_t k = keys + (t % 2) * layout::kv_tile, v = values + (t % 2) * layout::kv_tile;
    for (int i = tid; i < kKv * kChunks; i += kThreads) {
      const int row = i / kChunks, chunk = i % kChunks;
      const int token = t * kKv + row;
      const bool valid = token < kv_len;
      const char* src = pool;
      if (valid) {
        const int block = token / a.block_tokens;
        const uint32_t entry = table[block];
        src = (entry >= a.staged_from
                   ? static_cast<const char*>(a.staged) + uint64_t(entry - a.staged_from) * a.slot_stride
                   : pool + a.layer_offset + uint64_t(entry) * a.slot_stride) +
            head_bytes + uint64_t(token - block * a.block_tokens) * kHeadDim * 2 + chunk * 16;
      }
      const uint32_t at = swizzled(row, chunk, layout::kv_panel);
      copy_async16(k + at, src, valid);
      copy_async16(v + at, valid ? src + value_bytes : pool, valid);
    }
    commit_copies();
  };
  load_tile(t_begin);

  // This thread's rows within the block: rows quad and quad + 8 of its
  // warp's 16 (wgmma's accumulator layout: warp w of a warpgroup holds rows
  // 16 w .. 16 w + 15 of its 64).
  const int quad = lane / 4, pair = lane % 4 * 2;
  const int last_position = kv_len - 1;
  int position[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t token = (warp * 16 + h * 8 + quad) / group;
    position[h] = token < count ? first_position + int(token) : last_position;
  }

  float o[kHeadDim / 2]; // o[4 n + e]: the n-th 8 columns, as mma.sync's C fragment
#pragma unroll
  for (int i = 0; i < kHeadDim / 2; ++i)
    o[i] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  const float scale_log2 = a.scale * kLog2e;
  const uint32_t my_queries = queries + warpgroup * 64 * kRowBytes;

  for (int t = t_begin; t < t_end; ++t) {
    if (t + 1 < t_end)
      load_tile(t + 1);
    else
      commit_copies(); // an empty group keeps the wait below counting right
    wait_all_but_newest();
    fence_async_shared(); // this thread's copies (and, first time, queries) to the tensor cores
    __syncthreads();
    const uint32_t k_tile = keys + (t % 2) * layout::kv_tile, v_tile = values + (t % 2) * layout::kv_tile;

    // S = Q K^T over the 8 k-steps of 16 head dimensions: step k is 32
    // bytes into panel k / 4 (the swizzle applies to the whole address).
    float s[kKv / 2];
#pragma unroll
    for (int i = 0; i < kKv / 2; ++i)
      s[i] = 0.f;
    pin(s);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kHeadDim / 16; ++k)
      wgmma_scores(s, descriptor(my_queries + (k / 4) * layout::query_panel + (k % 4) * 32, 16, kAtomBytes),
                   descriptor(k_tile + (k / 4) * layout::kv_panel + (k % 4) * 32, 16, kAtomBytes), k);
    wgmma_commit();
    wgmma_wait_all();
    pin(s);

    // Scale to log2 units, mask the future, fold into the running max/sum.
    const int tile_first = t * kKv;
    const bool masking = tile_first + kKv - 1 > first_position;
    float tile_max[2] = {row_max[0], row_max[1]};
#pragma unroll
    for (int n = 0; n < kKv / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[4 * n + e] * scale_log2;
        if (masking && tile_first + n * 8 + pair + (e % 2) > position[e / 2])
          x = -INFINITY;
        s[4 * n + e] = x;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], x);
      }
    float rescale[2], base[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
      // A split's share may lie wholly in a row's future: such a row keeps
      // max -inf, sum and output 0.
      base[h] = tile_max[h] == -INFINITY ? 0.f : tile_max[h];
      rescale[h] = exp2f(row_max[h] - base[h]);
      row_max[h] = tile_max[h];
      row_sum[h] *= rescale[h];
    }
    uint32_t p[kKv / 16][4];
#pragma unroll
    for (int n = 0; n < kKv / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float x = exp2f(s[4 * n + e] - base[e / 2]);
        s[4 * n + e] = x;
        row_sum[e / 2] += x;
      }
#pragma unroll
    for (int k = 0; k < kKv / 16; ++k) {
      p[k][0] = pack(s[8 * k + 0], s[8 * k + 1]);
      p[k][1] = pack(s[8 * k + 2], s[8 * k + 3]);
      p[k][2] = pack(s[8 * k + 4], s[8 * k + 5]);
      p[k][3] = pack(s[8 * k + 6], s[8 * k + 7]);
    }
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n) {
      o[4 * n + 0] *= rescale[0];
      o[4 * n + 1] *= rescale[0];
      o[4 * n + 2] *= rescale[1];
      o[4 * n + 3] *= rescale[1];
    }

    // O += P V: k-step k is KV rows [16 k, 16 k + 16), two 8-row atoms
    // (stride byte offset 1024); the 128 output columns span both panels
    // (leading byte offset: one panel).
    pin(o);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < kKv / 16; ++k)
      wgmma_values(o, p[k], descriptor(v_tile + k * 16 * kRowBytes, layout::kv_panel, kAtomBytes));
    wgmma_commit();
    wgmma_wait_all();
    pin(o);
#pragma unroll
    for (int k = 0; k < kKv / 16; ++k)
      pin(p[k]);
    __syncthreads(); // buffer t % 2 is refilled by the next iteration's load
  }

  auto* out = static_cast<__nv_bfloat162*>(a.out);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = row_sum[h];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = warp * 16 + h * 8 + quad;
    const uint32_t token = row / group;
    if (token >= count)
      continue;
    if (a.splits > 1) {
      const uint64_t r = record(row);
      auto* partial =
          reinterpret_cast<float2*>(a.workspace + 2 * uint64_t(a.rows) * a.q_heads * a.splits + r * kHeadDim);
#pragma unroll
      for (int n = 0; n < kHeadDim / 8; ++n)
        partial[(n * 8 + pair) / 2] = make_float2(o[4 * n + 2 * h], o[4 * n + 2 * h + 1]);
      if (pair == 0) {
        // The merge works in natural exponents; a row that saw nothing has sum 0.
        a.workspace[2 * r] = sum == 0.f ? -FLT_MAX : row_max[h] / kLog2e;
        a.workspace[2 * r + 1] = sum;
      }
      continue;
    }
    const float inverse = 1.f / sum;
    const uint64_t base = (uint64_t(first_row + token) * a.q_heads + kv_head * group + row % group) * kHeadDim;
#pragma unroll
    for (int n = 0; n < kHeadDim / 8; ++n)
      out[(base + n * 8 + pair) / 2] =
          __floats2bfloat162_rn(o[4 * n + 2 * h] * inverse, o[4 * n + 2 * h + 1] * inverse);
  }
#endif // KVTIER_WGMMA_BODY
}

template <int kGroups>
int launch(const paged_prefill_args& a, void* stream) {
  const auto kernel = prefill_wgmma_kernel<kGroups>;
  const size_t shared = wgmma_layout<kGroups>::bytes;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared));
  if (e != cudaSuccess)
    return int(e);
  kernel<<<dim3(a.tiles, a.kv_heads, a.splits), kGroups * 128, shared, static_cast<cudaStream_t>(stream)>>>(a);
  return int(cudaGetLastError());
}

} // namespace

int paged_prefill_wgmma_launch(const paged_prefill_args& a, void* stream) {
  const int rows = a.tile_tokens * (a.q_heads / a.kv_heads);
  if (rows == wgmma_layout<4>::rows)
    return launch<4>(a, stream);
  if (rows == wgmma_layout<2>::rows)
    return launch<2>(a, stream);
  return int(cudaErrorInvalidValue);
}

} // namespace kvtier::model::cuda
