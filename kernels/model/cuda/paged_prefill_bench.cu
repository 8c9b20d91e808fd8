// Checks the tensor-core chunked-prefill attention against a float64 CPU
// reference and times it, beside the CUDA-core paged attention the forward
// used before (model_kernels' paged_attention, split as cuda_forward splits)
// in the same run, beside itself unsplit (splits = 1: one block per tile
// and KV head, as before the split over the context) and, where the Hopper
// warpgroup-MMA kernel runs, beside the mma.sync kernel, over kvtier's pool layout at Llama-3-8B attention geometry
// (32 query heads, 8 KV heads, head_dim 128, 16-token blocks, slots shuffled).
// A step is one or more sequences, each a chunk of new tokens after a cached
// prefix. Prints one table and, with --json FILE, one record per shape.
//   paged_prefill_bench [--check-only|--no-check] [--quick] [--narrow|--wide] [--splits N] [--mma-sync] [--no-cuda-core]
//                       [--json FILE]
// (--narrow / --wide: one tile width for every shape instead of the kernel's choice; --splits: one split for
// every timed shape;
// the checks run each shape at both widths with the chosen splits, then narrow split 8 ways, with each
// instruction the device runs; --mma-sync: the mma.sync kernel only, as on a GPU without wgmma)
// TFLOPS counts the causal work once: 4 * q_heads * head_dim per (row, visible position).
#include "kernels/model/cuda/model_kernels.hpp"
#include "kernels/model/cuda/paged_prefill.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace kc = kvtier::model::cuda;

#define CUDA_OK(x)                                                                                                     \
  do {                                                                                                                 \
    cudaError_t e_ = (x);                                                                                              \
    if (e_ != cudaSuccess) {                                                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                          \
      std::exit(2);                                                                                                    \
    }                                                                                                                  \
  } while (0)

__global__ void fill_random(__nv_bfloat16* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    p[i] = __float2bfloat16(float(int64_t(x % 2001) - 1000) / 1000.f);
  }
}

float bf(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct sequence {
  int cached, chunk;
};

struct step_shape {
  std::vector<sequence> sequences;
  int q_heads = 32, kv_heads = 8, block_tokens = 16;
  // The first `untiled` sequences get no tiles, as cuda_forward's decode rows
  // (the decode kernel's): the tiles start at a later row, and those rows'
  // outputs must be left as they were.
  int untiled = 0;
};

struct setup {
  step_shape s;
  uint64_t slots = 0, layer_bytes = 0;
  void* pool = nullptr;
  std::vector<uint32_t> tables, table_begin, tiles;
  std::vector<int64_t> positions, context;
  uint32_t rows = 0, first_tiled_row = 0;
  int64_t longest = 0;
  double flops = 0;
  uint32_t *d_tables = nullptr, *d_table_begin = nullptr, *d_tiles = nullptr;
  int64_t *d_positions = nullptr, *d_context = nullptr;
  float *d_q = nullptr, *d_scratch = nullptr, *d_workspace = nullptr;
  uint16_t* d_out = nullptr;
  uint32_t splits = 1, split_tokens = 1;
  int tile_tokens = 0, tc_splits = 1;
};

int multiprocessors = 0;
int forced_tile_rows = 0; // --narrow / --wide: rows a block (tokens x group) whatever the shape
int forced_splits = 0;    // the tensor-core kernel's split over the context; 0: its choice
kc::paged_prefill_instruction instruction = kc::paged_prefill_instruction::automatic;

setup make(const step_shape& s, uint64_t seed) {
  setup u{s};
  std::mt19937_64 rng(seed);
  const int group = s.q_heads / s.kv_heads;
  int64_t all_rows = 0, longest_context = 0;
  for (const auto& q : s.sequences) {
    all_rows += q.chunk;
    longest_context = std::max<int64_t>(longest_context, q.cached + q.chunk);
  }
  const int per_tile = forced_tile_rows
      ? forced_tile_rows / group
      : kc::paged_prefill_tile_tokens(group, all_rows, s.kv_heads, longest_context, multiprocessors);
  u.tile_tokens = per_tile;
  uint64_t blocks = 0;
  for (const auto& q : s.sequences)
    blocks += (q.cached + q.chunk + s.block_tokens - 1) / s.block_tokens;
  u.slots = blocks + blocks / 8 + 1;
  u.layer_bytes = uint64_t(2) * s.kv_heads * s.block_tokens * 128 * 2;
  CUDA_OK(cudaMalloc(&u.pool, u.slots * u.layer_bytes));
  fill_random<<<264, 256>>>(static_cast<__nv_bfloat16*>(u.pool), u.slots * u.layer_bytes / 2, seed);
  CUDA_OK(cudaGetLastError());
  std::vector<uint32_t> free_slots(u.slots);
  std::iota(free_slots.begin(), free_slots.end(), 0);
  std::shuffle(free_slots.begin(), free_slots.end(), rng);
  size_t next = 0;
  for (const auto& q : s.sequences) {
    const auto begin = static_cast<uint32_t>(u.tables.size());
    const int n_blocks = (q.cached + q.chunk + s.block_tokens - 1) / s.block_tokens;
    for (int b = 0; b < n_blocks; ++b)
      u.tables.push_back(free_slots[next++]);
    const bool tiled = &q - s.sequences.data() >= s.untiled;
    if (!tiled)
      u.first_tiled_row += q.chunk;
    for (int t = 0; tiled && t < q.chunk; t += per_tile) {
      u.tiles.push_back(u.rows + t);
      u.tiles.push_back(std::min(per_tile, q.chunk - t));
    }
    for (int t = 0; t < q.chunk; ++t) {
      u.positions.push_back(q.cached + t);
      u.context.push_back(q.cached);
      u.table_begin.push_back(begin);
      u.flops += 4.0 * s.q_heads * 128 * (q.cached + t + 1);
    }
    u.rows += q.chunk;
    u.longest = std::max<int64_t>(u.longest, q.cached + q.chunk);
  }
  auto up = [](auto*& d, const auto& h) {
    CUDA_OK(cudaMalloc(&d, h.size() * sizeof(h[0])));
    CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(h[0]), cudaMemcpyHostToDevice));
  };
  up(u.d_tables, u.tables);
  up(u.d_table_begin, u.table_begin);
  up(u.d_tiles, u.tiles);
  up(u.d_positions, u.positions);
  up(u.d_context, u.context);
  const uint64_t qn = uint64_t(u.rows) * s.q_heads * 128;
  std::vector<float> q(qn);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& x : q)
    x = dist(rng);
  up(u.d_q, q);
  CUDA_OK(cudaMalloc(&u.d_out, qn * 2));
  // The split cuda_forward uses for the CUDA-core kernel.
  const uint64_t per_split = uint64_t(u.rows) * s.kv_heads;
  u.splits = uint32_t(std::clamp<uint64_t>((264 + per_split - 1) / per_split, 1, uint64_t(u.longest + 63) / 64));
  u.split_tokens = uint32_t((u.longest + u.splits - 1) / u.splits);
  CUDA_OK(cudaMalloc(&u.d_scratch, kc::attention_scratch_floats(u.rows, s.q_heads, 128, u.splits) * 4));
  u.tc_splits = forced_splits
      ? forced_splits
      : kc::paged_prefill_splits(int(u.tiles.size() / 2), s.kv_heads, u.tile_tokens, group, u.longest, multiprocessors);
  CUDA_OK(cudaMalloc(&u.d_workspace,
                     std::max<uint64_t>(1, kc::paged_prefill_workspace_floats(u.rows, s.q_heads, u.tc_splits)) * 4));
  return u;
}

void release(setup& u) {
  for (void* p : {(void*)u.pool, (void*)u.d_tables, (void*)u.d_table_begin, (void*)u.d_tiles, (void*)u.d_positions,
                  (void*)u.d_context, (void*)u.d_q, (void*)u.d_out, (void*)u.d_scratch, (void*)u.d_workspace})
    cudaFree(p);
}

kc::paged_prefill_args args_for(const setup& u) {
  kc::paged_prefill_args a;
  a.q = u.d_q;
  a.out = u.d_out;
  a.pool = u.pool;
  a.slot_stride = u.layer_bytes;
  a.tables = u.d_tables;
  a.table_begin = u.d_table_begin;
  a.positions = u.d_positions;
  a.tile_rows = u.d_tiles;
  a.tiles = int32_t(u.tiles.size() / 2);
  a.tile_tokens = u.tile_tokens;
  a.q_heads = u.s.q_heads;
  a.kv_heads = u.s.kv_heads;
  a.block_tokens = u.s.block_tokens;
  a.scale = 1.f / std::sqrt(128.f);
  a.splits = u.tc_splits;
  a.workspace = u.d_workspace;
  a.first_row = u.first_tiled_row;
  a.rows = u.rows - u.first_tiled_row;
  a.instruction = instruction;
  return a;
}

void run_baseline(const setup& u) {
  kc::paged_rows r;
  r.pool = static_cast<const uint16_t*>(u.pool);
  r.slots = uint32_t(u.slots);
  r.kv_heads = u.s.kv_heads;
  r.head_dim = 128;
  r.block_tokens = u.s.block_tokens;
  r.positions = u.d_positions;
  r.context = u.d_context;
  r.table_begin = u.d_table_begin;
  r.tables = u.d_tables;
  r.rows = u.rows;
  kc::paged_attention(u.d_q, r, 0, u.s.q_heads, u.split_tokens, u.splits, u.d_scratch, u.d_out, nullptr, nullptr);
}

// Relative L2 error over `check_rows` (every row when empty) against float64
// over the same inputs (queries rounded to bf16 as the kernel does).
double check(const step_shape& s, uint64_t seed) {
  setup u = make(s, seed);
  const auto a = args_for(u);
  if (auto why = kc::paged_prefill_check_args(a); !why.empty()) {
    std::fprintf(stderr, "bad args: %s\n", why.c_str());
    std::exit(2);
  }
  const uint64_t qn = uint64_t(u.rows) * s.q_heads * 128;
  CUDA_OK(cudaMemset(u.d_out, 0xFF, qn * 2)); // NaN poison: every output must be written
  CUDA_OK(cudaError_t(kc::paged_prefill_attention_tc(a, nullptr)));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint16_t> pool(u.slots * u.layer_bytes / 2), out(qn);
  std::vector<float> q(qn);
  CUDA_OK(cudaMemcpy(pool.data(), u.pool, pool.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(q.data(), u.d_q, qn * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(out.data(), u.d_out, qn * 2, cudaMemcpyDeviceToHost));
  const int group = s.q_heads / s.kv_heads;
  for (uint32_t row = 0; row < u.first_tiled_row; ++row) // not the kernel's: untouched
    for (uint64_t i = 0; i < uint64_t(s.q_heads) * 128; ++i)
      if (out[uint64_t(row) * s.q_heads * 128 + i] != 0xFFFF)
        return INFINITY;
  // One (row, head) at a time on every host core: the reference is float64
  // over the whole context, minutes on one core for the long shapes.
  const uint32_t tiled_rows = u.rows - u.first_tiled_row;
  const uint64_t items = uint64_t(tiled_rows) * s.q_heads;
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  std::vector<double> err2(workers, 0), ref2(workers, 0);
  std::vector<char> finite(workers, 1);
  std::atomic<uint64_t> next_item{0};
  auto work = [&](unsigned me) {
    std::vector<double> score, acc(128);
    double query[128];
    for (uint64_t item; (item = next_item.fetch_add(1)) < items;) {
      const uint32_t row = u.first_tiled_row + uint32_t(item / s.q_heads);
      const int h = int(item % s.q_heads), kvh = h / group;
      const int len = int(u.positions[row] + 1);
      const uint32_t* table = u.tables.data() + u.table_begin[row];
      auto at = [&](int t, bool value) {
        uint64_t e = uint64_t(table[t / s.block_tokens]) * u.layer_bytes / 2 +
            (uint64_t(kvh) * s.block_tokens + t % s.block_tokens) * 128;
        if (value)
          e += uint64_t(s.kv_heads) * s.block_tokens * 128;
        return &pool[e];
      };
      const float* qh = &q[(uint64_t(row) * s.q_heads + h) * 128];
      for (int i = 0; i < 128; ++i) // rounded to bf16 as the kernel rounds it
        query[i] = bf(__bfloat16_as_ushort(__float2bfloat16(qh[i])));
      score.assign(len, 0);
      double m = -1e300;
      for (int t = 0; t < len; ++t) {
        const uint16_t* key = at(t, false);
        double d = 0;
        for (int i = 0; i < 128; ++i)
          d += query[i] * bf(key[i]);
        score[t] = d / std::sqrt(128.0);
        m = std::max(m, score[t]);
      }
      double sum = 0;
      for (double& x : score)
        sum += (x = std::exp(x - m));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t = 0; t < len; ++t) {
        const uint16_t* value = at(t, true);
        for (int i = 0; i < 128; ++i)
          acc[i] += score[t] * bf(value[i]);
      }
      for (int i = 0; i < 128; ++i) {
        const double r = acc[i] / sum;
        const double got = bf(out[(uint64_t(row) * s.q_heads + h) * 128 + i]);
        if (!std::isfinite(got))
          finite[me] = 0;
        err2[me] += (got - r) * (got - r);
        ref2[me] += r * r;
      }
    }
  };
  std::vector<std::thread> pool_threads;
  for (unsigned w = 0; w < workers; ++w)
    pool_threads.emplace_back(work, w);
  for (auto& t : pool_threads)
    t.join();
  release(u);
  if (std::find(finite.begin(), finite.end(), 0) != finite.end())
    return INFINITY;
  return std::sqrt(std::accumulate(err2.begin(), err2.end(), 0.0) / std::accumulate(ref2.begin(), ref2.end(), 0.0));
}

double median_us(const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  fn();
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<double> us;
  for (int r = 0; r < 5; ++r) {
    CUDA_OK(cudaEventRecord(start));
    fn();
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

} // namespace

int main(int argc, char** argv) {
  bool check_only = false, no_check = false, quick = false, mma_only = false, cuda_core = true;
  int timed_splits = 0;
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check-only"))
      check_only = true;
    else if (!std::strcmp(argv[i], "--no-check")) // the float64 checks take a minute on the host
      no_check = true;
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json = argv[++i];
    else if (!std::strcmp(argv[i], "--splits") && i + 1 < argc)
      timed_splits = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--narrow"))
      forced_tile_rows = 128;
    else if (!std::strcmp(argv[i], "--wide"))
      forced_tile_rows = 256;
    else if (!std::strcmp(argv[i], "--mma-sync"))
      mma_only = true;
    else if (!std::strcmp(argv[i], "--no-cuda-core")) // the CUDA-core kernel takes seconds on long shapes
      cuda_core = false;
    else {
      std::fprintf(
          stderr,
          "unknown argument %s\nusage: paged_prefill_bench [--check-only|--no-check] [--quick] [--narrow|--wide] "
          "[--splits N] [--mma-sync] [--no-cuda-core] [--json FILE]\n",
          argv[i]);
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0); // each check's line as it finishes, even into a pipe
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  multiprocessors = prop.multiProcessorCount;
  const bool wgmma = !mma_only && kc::paged_prefill_has_wgmma();
  std::printf("device %s, %d SMs, %s\n", prop.name, prop.multiProcessorCount,
              wgmma ? "wgmma kernel (mma.sync beside it)" : "mma.sync kernel");

  // Correctness: groups 1/2/4/8, chunks not a multiple of a tile, several
  // sequences in one step (a lone decode row among them), blocks of 1 and 32,
  // each kernel instance.
  const step_shape checks[] = {
      {{{0, 1}}},
      {{{0, 300}}},
      {{{1000, 77}}},
      {{{0, 33}, {500, 1}, {130, 64}}},
      {{{4000, 130}}, 32, 32},
      {{{700, 90}}, 32, 16},
      {{{64, 100}, {0, 5}}, 64, 8, 32},
      {{{9, 40}}, 8, 8, 1},
      {{{0, 600}}, 64, 64}, // 320 blocks at 128 rows: the two-blocks-per-SM instance
      {{{12000, 40}}},      // few tiles over a long prefix: split over the context
      {{{3000, 200}, {0, 7}}},
      {{{900, 1}, {5000, 1}, {2000, 90}}, 32, 8, 16, 2}, // after two decode rows the kernel leaves alone
  };
  bool ok = true;
  const int chosen = forced_tile_rows;
  const struct { int width, splits; } passes[] = {{128, 0}, {256, 0}, {128, 8}};
  using kind = kc::paged_prefill_instruction;
  for (const kind checked : {kind::wgmma, kind::mma_sync})
    for (const auto& pass_kind : passes)
      for (const auto& s : checks) {
        if (no_check || (checked == kind::wgmma && !wgmma))
          break;
        forced_tile_rows = pass_kind.width;
        forced_splits = pass_kind.splits;
        instruction = checked;
        const double rel = check(s, 99 + s.sequences[0].cached + s.q_heads);
        const bool pass = rel < 1e-2; // bf16 queries, probabilities and output: ~4e-3
        ok &= pass;
        std::printf("check %s %d-row tiles, %s splits, heads %d/%d block %d sequences",
                    checked == kind::wgmma ? "wgmma" : "mma.sync", pass_kind.width, pass_kind.splits ? "8" : "chosen",
                    s.q_heads, s.kv_heads, s.block_tokens);
        for (const auto& q : s.sequences)
          std::printf(" %d+%d", q.cached, q.chunk);
        std::printf(": rel_l2 %.2e %s\n", rel, pass ? "ok" : "FAIL");
      }
  forced_tile_rows = chosen;
  forced_splits = timed_splits;
  instruction = wgmma ? kind::wgmma : kind::mma_sync;
  if (!ok)
    return 1;
  if (check_only)
    return 0;

  FILE* out = json ? std::fopen(json, "w") : nullptr;
  if (out)
    std::fprintf(out, "[\n");
  bool first = true;
  std::printf("%6s %7s %7s %10s %8s %12s %9s %10s %7s %14s %9s\n", "chunk", "cached", "splits", "tc_us", "TFLOPS",
              "unsplit_us", "vs_unsp", "mma_us", "vs_mma", "cuda_core_us", "speedup");
  for (int chunk : {512, 2048, 8192})
    for (int cached : {0, 8192, 32768, 65536}) {
      if (quick &&
          !((chunk == 512 && cached >= 32768) || (chunk == 2048 && cached % 32768 == 0) ||
            (chunk == 8192 && cached == 65536)))
        continue;
      setup u = make({{{cached, chunk}}}, 7);
      const auto a = args_for(u);
      const double tc = median_us([&] { CUDA_OK(cudaError_t(kc::paged_prefill_attention_tc(a, nullptr))); });
      auto unsplit_args = a;
      unsplit_args.splits = 1;
      const double unsplit =
          median_us([&] { CUDA_OK(cudaError_t(kc::paged_prefill_attention_tc(unsplit_args, nullptr))); });
      auto mma_args = a;
      mma_args.instruction = kind::mma_sync;
      const double mma =
          wgmma ? median_us([&] { CUDA_OK(cudaError_t(kc::paged_prefill_attention_tc(mma_args, nullptr))); }) : tc;
      const double base = cuda_core ? median_us([&] { run_baseline(u); }) : 0.0;
      const double tflops = u.flops / (tc * 1e-6) / 1e12;
      std::printf("%6d %7d %7d %10.1f %8.1f %12.1f %9.2f %10.1f %7.2f %14.1f %9.2f   (%d-token tiles)\n", chunk, cached,
                  a.splits, tc, tflops, unsplit, unsplit / tc, mma, mma / tc, base, base / tc, u.tile_tokens);
      if (out) {
        std::fprintf(
            out,
            "%s  {\"kernel\": \"kvtier_paged_prefill_tc\", \"chunk\": %d, \"cached\": %d, \"splits\": %d, "
            "\"median_us\": %.2f, \"tflops\": %.2f, \"unsplit_us\": %.2f, \"speedup_vs_unsplit\": %.3f, "
            "\"mma_sync_us\": %.2f, \"speedup_vs_mma_sync\": %.3f, "
            "\"cuda_core_us\": %.2f, \"speedup_vs_cuda_core\": %.3f, \"tile_tokens\": %d, \"instruction\": \"%s\"}",
            first ? "" : ",\n", chunk, cached, a.splits, tc, tflops, unsplit, unsplit / tc, mma, mma / tc, base,
            base / tc, u.tile_tokens, wgmma ? "wgmma" : "mma.sync");
        first = false;
      }
      release(u);
    }
  if (out) {
    std::fprintf(out, "\n]\n");
    std::fclose(out);
  }
  return 0;
}
