// Checks a paged decode kernel against a float64 CPU reference and times it
// over kvtier's pool layout at Llama-3-8B attention geometry (32 query heads,
// 8 KV heads, head_dim 128, 16-token blocks, slots scattered at random).
// Prints one table and, with --json FILE, one record per shape.
//   paged_decode_bench [--kernel tc|simt] [--check-only] [--quick]
//                      [--group N] [--contiguous] [--kv bf16|fp8] [--json FILE]
// --kv fp8: K and V stored as float8 e4m3 (tensor-core kernel), checked against
// float64 over the same e4m3 values and scales.
// Bandwidth counts the K and V bytes the shape must read once, plus q and out.
#include "kernels/model/cuda/paged_decode.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace {

using kvtier::model::cuda::paged_decode_args;

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

__global__ void fill_random_fp8(__nv_fp8_e4m3* p, uint64_t n, uint64_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) {
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    p[i] = __nv_fp8_e4m3(float(int64_t(x % 2001) - 1000) / 1000.f);
  }
}

bool kv_fp8 = false;                                 // --kv fp8
constexpr float kKeyScale = 0.5f, kValueScale = 2.f; // not 1: the check sees a scale applied twice or not at all
int kv_element_bytes() {
  return kv_fp8 ? 1 : 2;
}

float bf(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool contiguous_slots = false; // --contiguous: each sequence's blocks in consecutive slots

struct shape {
  int batch, context, q_heads = 32, kv_heads = 8, block_tokens = 16;
  bool ragged = false; // contexts vary from context/2 to context
};

struct pool_on_device {
  uint64_t layers = 0, slots = 0, layer_bytes = 0;
  void* base = nullptr;
};

struct setup {
  shape s;
  pool_on_device pool;
  std::vector<int32_t> tables, lens;
  int32_t max_blocks = 0;
  int32_t *d_tables = nullptr, *d_lens = nullptr;
  void *d_q = nullptr, *d_out = nullptr, *d_work = nullptr;
  uint64_t kv_bytes = 0; // bytes of K and V the shape reads once
};

setup make(const shape& s, int sms, uint64_t min_pool_bytes, uint64_t seed) {
  setup u{s};
  std::mt19937_64 rng(seed);
  u.max_blocks = (s.context + s.block_tokens - 1) / s.block_tokens;
  u.lens.resize(s.batch);
  for (int b = 0; b < s.batch; ++b)
    u.lens[b] = s.ragged ? s.context / 2 + int(rng() % (s.context / 2 + 1)) : s.context;
  u.lens[0] = s.context;
  const uint64_t blocks = uint64_t(s.batch) * u.max_blocks;
  u.pool.slots = blocks + blocks / 8 + 1; // spare slots: the table is a random subset
  u.pool.layer_bytes = uint64_t(2) * s.kv_heads * s.block_tokens * 128 * kv_element_bytes();
  const uint64_t layer_total = u.pool.slots * u.pool.layer_bytes;
  u.pool.layers = std::max<uint64_t>(1, (min_pool_bytes + layer_total - 1) / layer_total);
  CUDA_OK(cudaMalloc(&u.pool.base, u.pool.layers * layer_total));
  if (kv_fp8)
    fill_random_fp8<<<4 * sms, 256>>>(static_cast<__nv_fp8_e4m3*>(u.pool.base), u.pool.layers * layer_total, seed);
  else
    fill_random<<<4 * sms, 256>>>(static_cast<__nv_bfloat16*>(u.pool.base), u.pool.layers * layer_total / 2, seed);
  CUDA_OK(cudaGetLastError());
  std::vector<int32_t> slots(u.pool.slots);
  std::iota(slots.begin(), slots.end(), 0);
  if (!contiguous_slots)
    std::shuffle(slots.begin(), slots.end(), rng);
  u.tables.assign(slots.begin(), slots.begin() + blocks);
  for (int b = 0; b < s.batch; ++b)
    u.kv_bytes += uint64_t(u.lens[b]) * s.kv_heads * 128 * 2 * kv_element_bytes();
  CUDA_OK(cudaMalloc(&u.d_tables, blocks * 4));
  CUDA_OK(cudaMemcpy(u.d_tables, u.tables.data(), blocks * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMalloc(&u.d_lens, s.batch * 4));
  CUDA_OK(cudaMemcpy(u.d_lens, u.lens.data(), s.batch * 4, cudaMemcpyHostToDevice));
  const uint64_t qn = uint64_t(s.batch) * s.q_heads * 128;
  CUDA_OK(cudaMalloc(&u.d_q, qn * 2));
  CUDA_OK(cudaMalloc(&u.d_out, qn * 2));
  fill_random<<<sms, 256>>>(static_cast<__nv_bfloat16*>(u.d_q), qn, seed + 7);
  CUDA_OK(cudaGetLastError());
  return u;
}

paged_decode_args args_for(const setup& u, uint64_t layer) {
  paged_decode_args a;
  a.q = u.d_q;
  a.out = u.d_out;
  a.pool = u.pool.base;
  a.layer_offset = layer * u.pool.slots * u.pool.layer_bytes;
  a.slot_stride = u.pool.layer_bytes;
  a.block_tables = u.d_tables;
  a.max_blocks = u.max_blocks;
  a.context_lens = u.d_lens;
  a.max_context = u.s.context;
  a.batch = u.s.batch;
  a.q_heads = u.s.q_heads;
  a.kv_heads = u.s.kv_heads;
  a.block_tokens = u.s.block_tokens;
  a.scale = 1.f / std::sqrt(128.f);
  a.kv_fp8 = kv_fp8;
  if (kv_fp8) {
    a.k_scale = kKeyScale;
    a.v_scale = kValueScale;
  }
  return a;
}

void release(setup& u) {
  cudaFree(u.pool.base);
  cudaFree(u.d_tables);
  cudaFree(u.d_lens);
  cudaFree(u.d_q);
  cudaFree(u.d_out);
  cudaFree(u.d_work);
}

bool use_tensor_cores = true;

uint64_t workspace_bytes(const paged_decode_args& a, int sms) {
  return use_tensor_cores ? kvtier::model::cuda::paged_decode_tc_workspace_bytes(a, sms)
                          : kvtier::model::cuda::paged_decode_workspace_bytes(a, sms);
}
int attend(const paged_decode_args& a, void* work, int sms) {
  return use_tensor_cores ? kvtier::model::cuda::paged_decode_attention_tc(a, work, sms, nullptr)
                          : kvtier::model::cuda::paged_decode_attention(a, work, sms, nullptr);
}

// Relative L2 error of the kernel's output against float64 over the same bf16
// inputs, on layer `layer`; every output element must have been written.
double check(const shape& s, int sms, uint64_t seed) {
  setup u = make(s, sms, 0, seed);
  const paged_decode_args a = args_for(u, 0);
  if (auto why = kvtier::model::cuda::paged_decode_check_args(a); !why.empty()) {
    std::fprintf(stderr, "bad args: %s\n", why.c_str());
    std::exit(2);
  }
  CUDA_OK(cudaMalloc(&u.d_work, workspace_bytes(a, sms)));
  const uint64_t qn = uint64_t(s.batch) * s.q_heads * 128;
  CUDA_OK(cudaMemset(u.d_out, 0xFF, qn * 2)); // NaN poison
  CUDA_OK(cudaError_t(attend(a, u.d_work, sms)));
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<uint8_t> pool(u.pool.slots * u.pool.layer_bytes);
  std::vector<uint16_t> q(qn), out(qn);
  CUDA_OK(cudaMemcpy(pool.data(), u.pool.base, pool.size(), cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(q.data(), u.d_q, qn * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(out.data(), u.d_out, qn * 2, cudaMemcpyDeviceToHost));
  const int group = s.q_heads / s.kv_heads;
  double err2 = 0, ref2 = 0;
  std::vector<double> score;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.q_heads; ++h) {
      const int kvh = h / group;
      const int len = u.lens[b];
      score.assign(len, 0);
      // Element i of token t's K (or V) row, as the kernel must read it.
      auto at = [&](int t, bool value, int i) -> double {
        const int slot = u.tables[uint64_t(b) * u.max_blocks + t / s.block_tokens];
        uint64_t e = (uint64_t(kvh) * s.block_tokens + t % s.block_tokens) * 128 + i;
        if (value)
          e += uint64_t(s.kv_heads) * s.block_tokens * 128;
        const uint8_t* slice = &pool[uint64_t(slot) * u.pool.layer_bytes];
        if (!kv_fp8) {
          uint16_t h;
          std::memcpy(&h, slice + 2 * e, 2);
          return bf(h);
        }
        __nv_fp8_e4m3 f;
        f.__x = slice[e];
        return double(float(f)) * (value ? kValueScale : kKeyScale);
      };
      double m = -1e300;
      for (int t = 0; t < len; ++t) {
        double d = 0;
        for (int i = 0; i < 128; ++i)
          d += double(bf(q[(uint64_t(b) * s.q_heads + h) * 128 + i])) * at(t, false, i);
        score[t] = d / std::sqrt(128.0);
        m = std::max(m, score[t]);
      }
      double sum = 0;
      for (double& x : score)
        sum += (x = std::exp(x - m));
      for (int i = 0; i < 128; ++i) {
        double r = 0;
        for (int t = 0; t < len; ++t)
          r += score[t] * at(t, true, i);
        r /= sum;
        const double got = bf(out[(uint64_t(b) * s.q_heads + h) * 128 + i]);
        if (!std::isfinite(got))
          return INFINITY;
        err2 += (got - r) * (got - r);
        ref2 += r * r;
      }
    }
  release(u);
  return std::sqrt(err2 / ref2);
}

struct timing {
  double median_us, gbps;
};

timing bench(const shape& s, int sms) {
  setup u = make(s, sms, uint64_t(512) << 20, 42); // rotate over >= 512 MiB: L2 holds none of it
  paged_decode_args a = args_for(u, 0);
  CUDA_OK(cudaMalloc(&u.d_work, workspace_bytes(a, sms)));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  auto run = [&](uint64_t i) {
    a.layer_offset = (i % u.pool.layers) * u.pool.slots * u.pool.layer_bytes;
    CUDA_OK(cudaError_t(attend(a, u.d_work, sms)));
  };
  for (int i = 0; i < 5; ++i)
    run(i);
  const int reps = 7, per = int(std::max<uint64_t>(3, std::min<uint64_t>(50, u.pool.layers * 2)));
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    CUDA_OK(cudaEventRecord(start));
    for (int i = 0; i < per; ++i)
      run(uint64_t(r) * per + i);
    CUDA_OK(cudaEventRecord(stop));
    CUDA_OK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0 * ms / per);
  }
  std::sort(us.begin(), us.end());
  const double med = us[us.size() / 2];
  const uint64_t bytes = u.kv_bytes + uint64_t(s.batch) * s.q_heads * 128 * 2 * 2;
  release(u);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return {med, bytes / (med * 1e-6) / 1e9};
}

} // namespace

int main(int argc, char** argv) {
  bool check_only = false, quick = false;
  int group = 4; // query heads per KV head: Llama-3-8B has 32 over 8
  const char* json = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--check-only"))
      check_only = true;
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--group") && i + 1 < argc)
      group = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json = argv[++i];
    else if (!std::strcmp(argv[i], "--contiguous"))
      contiguous_slots = true;
    else if (!std::strcmp(argv[i], "--kv") && i + 1 < argc)
      kv_fp8 = !std::strcmp(argv[++i], "fp8");
    else if (!std::strcmp(argv[i], "--kernel") && i + 1 < argc)
      use_tensor_cores = std::strcmp(argv[++i], "simt") != 0;
    else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, kernel %s, KV %s\n", prop.name, sms, use_tensor_cores ? "tensor cores" : "simt",
              kv_fp8 ? "fp8 e4m3" : "bf16");

  // Correctness: group sizes 1/2/4/8, ragged contexts, contexts not a multiple of the block or partition.
  const shape checks[] = {{1, 1, 32, 8, 16},          {3, 77, 32, 8, 16, true},   {2, 1000, 32, 32, 16},
                          {2, 1000, 32, 16, 16},      {4, 5000, 32, 4, 16, true}, {1, 33000, 32, 8, 16},
                          {2, 4099, 64, 8, 32, true}, {5, 300, 8, 8, 1}};
  bool ok = true;
  for (const shape& s : checks) {
    const double rel = check(s, sms, 1234 + s.batch * 7 + s.context);
    const bool pass = rel < 1e-2; // bf16 output rounding: ~4e-3
    ok &= pass;
    std::printf("check batch %d context %d heads %d/%d block %d%s: rel_l2 %.2e %s\n", s.batch, s.context, s.q_heads,
                s.kv_heads, s.block_tokens, s.ragged ? " ragged" : "", rel, pass ? "ok" : "FAIL");
  }
  if (!ok)
    return 1;
  if (check_only)
    return 0;

  FILE* out = json ? std::fopen(json, "w") : nullptr;
  if (out)
    std::fprintf(out, "[\n");
  bool first = true;
  std::printf("group %d\n%6s %8s %12s %10s\n", group, "batch", "context", "median_us", "GB/s");
  for (int batch : {1, 8, 32, 128})
    for (int context : {1024, 4096, 16384, 32768}) {
      if (quick &&
          !((batch == 1 && context == 32768) || (batch == 8 && context == 32768) || (batch == 32 && context == 16384) ||
            (batch == 128 && context == 4096)))
        continue;
      const shape s{batch, context, 8 * group};
      const timing t = bench(s, sms);
      std::printf("%6d %8d %12.1f %10.0f\n", batch, context, t.median_us, t.gbps);
      if (out) {
        std::fprintf(
            out,
            "%s  {\"kernel\": \"kvtier_paged_decode_%s%s\", \"batch\": %d, \"context\": %d, \"median_us\": %.2f, "
            "\"gbps\": %.1f}",
            first ? "" : ",\n", use_tensor_cores ? "tc" : "simt", kv_fp8 ? "_fp8" : "", batch, context, t.median_us,
            t.gbps);
        first = false;
      }
    }
  if (out) {
    std::fprintf(out, "\n]\n");
    std::fclose(out);
  }
  return 0;
}
