// bench/stream: tiered PagedAttention on the GPU — decode steps whose
// context is partly in the pinned DRAM pool, streamed into HBM layer by layer
// beside compute (kernels/model/cuda/layer_stager.hpp), at Llama-3-8B
// geometry (random weights and KV, bf16). Same run, three measurements per
// shape:
//  - the step with every block in HBM (where it fits): compute alone;
//  - the stager's copies alone (the same strided DMAs, no compute): the
//    link's rate for exactly these bytes;
//  - the streamed step. PCIe busy = copy-alone time / streamed step time
//    (1.0 when the step takes exactly as long as its copies: every byte
//    overlapped); slowdown = streamed step / all-HBM step.
// The moonshot: a 1,048,576-token context at batch 1 (128 GiB of bf16 KV,
// more than HBM holds beside the weights), decoded with exact attention.
// --kv fp8 runs every shape over float8 (e4m3) KV: half the bytes per block,
// so the 1M-token context (64 GiB) fits the HBM pool whole.
//
//   bench/stream [--hbm-gib 96] [--context 1048576] [--steps 3] [--kv bf16|fp8] [--json out.json] [--quick]

#include "bench/kernels/llama3_8b.hpp"
#include "kernels/model/cuda/cuda_forward.hpp"
#include "kernels/model/cuda/model_kernels.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

using namespace kvtier;
using namespace kvtier::model;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct shape_result {
  std::string name;
  uint64_t context = 0, batch = 0, streamed_blocks = 0, hbm_blocks = 0;
  double hbm_step_ms = 0, copy_alone_ms = 0, streamed_step_ms = 0, staged_gib = 0;
};

} // namespace

int main(int argc, char** argv) {
  double hbm_gib = 96;
  uint64_t moon = 1ull << 20;
  int steps = 3;
  std::string json_path;
  bool quick = false;
  bool fp8 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--hbm-gib") && i + 1 < argc)
      hbm_gib = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--context") && i + 1 < argc)
      moon = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--kv") && i + 1 < argc &&
             (!std::strcmp(argv[i + 1], "bf16") || !std::strcmp(argv[i + 1], "fp8")))
      fp8 = !std::strcmp(argv[++i], "fp8");
    else {
      std::fprintf(stderr, "bench/stream: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no usable GPU\n");
    return 77;
  }
  if (quick) {
    hbm_gib = 8;
    moon = 96 * 1024;
  }
  const llama_config c = bench::llama3_8b();
  const uint32_t B = 16;
  const uint64_t layer_bytes = paged_kv_pool::layer_bytes_for(c.kv_heads, c.head_dim, B, fp8);
  const uint64_t block_bytes = layer_bytes * c.layers;
  const auto hbm_slots = static_cast<uint32_t>(hbm_gib * (1ull << 30) / block_bytes);
  const uint64_t moon_blocks = moon / B + 1;
  // Room for the streamed shapes below (up to 8,192 blocks) and the moonshot's overflow.
  const auto dram_slots =
      static_cast<uint32_t>(std::max<uint64_t>(moon_blocks > hbm_slots ? moon_blocks - hbm_slots + 16 : 0, 8192 + 16));
  paged_kv_pool pool;
  pool.kv_heads = c.kv_heads;
  pool.head_dim = c.head_dim;
  pool.block_tokens = B;
  pool.kv_fp8 = fp8;
  pool.layout = {slot_order::layer_major, hbm_slots, c.layers, layer_bytes};
  pool.dram_layout = {slot_order::block_major, dram_slots, c.layers, layer_bytes};
  void* base = nullptr;
  void* host = nullptr;
  double t0 = now_s();
  if (cudaMalloc(&base, pool.layout.total_bytes()) != cudaSuccess) {
    std::printf("cannot allocate %.1f GiB of HBM pool\n", pool.layout.total_bytes() / double(1ull << 30));
    return 1;
  }
  if (cudaHostAlloc(&host, pool.dram_layout.total_bytes(), cudaHostAllocDefault) != cudaSuccess) {
    std::printf("cannot pin %.1f GiB of DRAM pool\n", pool.dram_layout.total_bytes() / double(1ull << 30));
    return 1;
  }
  pool.base = static_cast<std::byte*>(base);
  pool.dram_base = static_cast<std::byte*>(host);
  // Random K/V (keys and values of spread 1): HBM directly, DRAM through a device chunk.
  const uint64_t chunk = 1ull << 30;
  auto fill = [&](std::byte* at, uint64_t bytes, uint64_t seed) {
    if (fp8)
      cuda::fill_random_fp8(reinterpret_cast<uint8_t*>(at), bytes, 0, 1, seed, nullptr);
    else
      cuda::fill_random(reinterpret_cast<uint16_t*>(at), bytes / 2, 0, 1, seed, nullptr);
  };
  for (uint64_t at = 0; at < pool.layout.total_bytes(); at += chunk)
    fill(pool.base + at, std::min(chunk, pool.layout.total_bytes() - at), 11 + at / chunk);
  void* staging = nullptr;
  cudaMalloc(&staging, chunk);
  for (uint64_t at = 0; at < pool.dram_layout.total_bytes(); at += chunk) {
    const uint64_t n = std::min(chunk, pool.dram_layout.total_bytes() - at);
    fill(static_cast<std::byte*>(staging), n, 7777 + at / chunk);
    cudaMemcpy(pool.dram_base + at, staging, n, cudaMemcpyDeviceToHost);
  }
  cudaFree(staging);
  cudaDeviceSynchronize();
  std::string why;
  auto model = cuda_forward::create_random(c, 1, pool, why);
  if (!model) {
    std::printf("cuda_forward: %s\n", why.c_str());
    return 1;
  }
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  std::printf(
      "KV %s; HBM pool %.1f GiB (%u blocks of %llu KiB), pinned DRAM pool %.1f GiB (%u blocks), set up in %.1f s; "
      "%.1f GiB of HBM free\n",
      fp8 ? "float8 e4m3" : "bf16", pool.layout.total_bytes() / double(1ull << 30), hbm_slots,
      static_cast<unsigned long long>(block_bytes >> 10), pool.dram_layout.total_bytes() / double(1ull << 30),
      dram_slots, now_s() - t0, free_bytes / double(1ull << 30));

  // Decode steps of one sequence: `context` cached tokens, the first
  // `streamed` blocks in DRAM (slots 0..), the rest in HBM (slots 0..).
  auto step_ms = [&](uint64_t context, uint64_t streamed, int reps, double* staged_gib) {
    const uint64_t blocks = context / B + 1;
    std::vector<uint32_t> table(blocks);
    for (uint64_t j = 0; j < blocks; ++j)
      table[j] =
          j < streamed ? paged_kv_pool::dram_entry(static_cast<uint32_t>(j)) : static_cast<uint32_t>(j - streamed);
    std::vector<uint32_t> token{7};
    std::vector<sequence_input> batch{{token, context, context, table, false}};
    model->launch(batch); // warm-up
    model->synchronize();
    double start = now_s();
    for (int i = 0; i < reps; ++i)
      model->launch(batch);
    model->synchronize();
    if (staged_gib)
      *staged_gib = model->last_staged_bytes() / double(1ull << 30);
    return (now_s() - start) * 1000 / reps;
  };
  // The same strided copies the stager makes (one run of adjacent DRAM slots per layer), alone.
  auto copy_alone_ms = [&](uint64_t streamed, int reps) {
    void* dst = nullptr;
    if (cudaMalloc(&dst, 2 * streamed * layer_bytes) != cudaSuccess)
      return 0.0;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto once = [&] {
      for (uint32_t l = 0; l < c.layers; ++l)
        cudaMemcpy2DAsync(static_cast<std::byte*>(dst) + (l % 2) * streamed * layer_bytes, layer_bytes,
                          pool.dram_base + pool.dram_layout.offset(0, l), block_bytes, layer_bytes, streamed,
                          cudaMemcpyHostToDevice, s);
    };
    once();
    cudaStreamSynchronize(s);
    double start = now_s();
    for (int i = 0; i < reps; ++i)
      once();
    cudaStreamSynchronize(s);
    double ms = (now_s() - start) * 1000 / reps;
    cudaStreamDestroy(s);
    cudaFree(dst);
    return ms;
  };

  std::vector<shape_result> results;
  // Shapes that fit HBM, a share streamed: what streaming costs over HBM.
  std::vector<uint64_t> contexts = quick ? std::vector<uint64_t>{32768} : std::vector<uint64_t>{131072, 262144};
  for (uint64_t ctx : contexts)
    for (double share : {0.125, 0.25, 0.5}) {
      const uint64_t blocks = ctx / B + 1;
      shape_result r;
      r.name = "c" + std::to_string(ctx / 1024) + "k streamed " + std::to_string(int(share * 100)) + "%";
      r.context = ctx;
      r.batch = 1;
      r.streamed_blocks = static_cast<uint64_t>(blocks * share);
      r.hbm_blocks = blocks - r.streamed_blocks;
      if (blocks > hbm_slots || r.streamed_blocks > dram_slots)
        continue;
      r.hbm_step_ms = step_ms(ctx, 0, 5, nullptr);
      r.copy_alone_ms = copy_alone_ms(r.streamed_blocks, 3);
      r.streamed_step_ms = step_ms(ctx, r.streamed_blocks, 3, &r.staged_gib);
      results.push_back(r);
    }
  // The moonshot: HBM full, the rest streamed.
  {
    const uint64_t blocks = moon / B + 1;
    shape_result r;
    r.name = "moonshot c" + std::to_string(moon / 1024) + "k";
    r.context = moon;
    r.batch = 1;
    r.streamed_blocks = blocks > hbm_slots ? blocks - hbm_slots + 1 : 0;
    r.hbm_blocks = blocks - r.streamed_blocks;
    r.copy_alone_ms = r.streamed_blocks ? copy_alone_ms(r.streamed_blocks, 1) : 0;
    r.streamed_step_ms = step_ms(moon, r.streamed_blocks, steps, &r.staged_gib);
    results.push_back(r);
  }

  std::printf("\n%-26s %9s %9s %10s %12s %11s %9s %9s\n", "shape", "streamed", "staged", "all-HBM", "copies alone",
              "streamed", "PCIe busy", "slowdown");
  std::string json = std::string("{\n  \"geometry\": \"llama-3-8b\",\n  \"kv\": \"") + (fp8 ? "fp8" : "bf16") +
      "\",\n  \"block_tokens\": 16,\n  \"results\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    const double busy = r.streamed_step_ms > 0 ? r.copy_alone_ms / r.streamed_step_ms : 0;
    const double slowdown = r.hbm_step_ms > 0 ? r.streamed_step_ms / r.hbm_step_ms : 0;
    const double link_gbps = r.copy_alone_ms > 0 ? r.staged_gib * (1ull << 30) / 1e9 / (r.copy_alone_ms / 1000) : 0;
    std::printf("%-26s %9llu %7.2f G %8.2f ms %9.2f ms %8.2f ms %9.3f %9.3f   (%.1f tokens/s; link %.1f GB/s)\n",
                r.name.c_str(), static_cast<unsigned long long>(r.streamed_blocks), r.staged_gib, r.hbm_step_ms,
                r.copy_alone_ms, r.streamed_step_ms, busy, slowdown, 1000 / r.streamed_step_ms, link_gbps);
    json += "    {\"shape\": \"" + r.name + "\", \"context\": " + std::to_string(r.context) +
        ", \"batch\": " + std::to_string(r.batch) + ", \"streamed_blocks\": " + std::to_string(r.streamed_blocks) +
        ", \"hbm_blocks\": " + std::to_string(r.hbm_blocks) + ", \"staged_gib\": " + std::to_string(r.staged_gib) +
        ", \"all_hbm_step_ms\": " + std::to_string(r.hbm_step_ms) +
        ", \"copies_alone_ms\": " + std::to_string(r.copy_alone_ms) +
        ", \"streamed_step_ms\": " + std::to_string(r.streamed_step_ms) + ", \"pcie_busy\": " + std::to_string(busy) +
        ", \"slowdown_vs_all_hbm\": " + std::to_string(slowdown) +
        ", \"tokens_per_s\": " + std::to_string(1000 / r.streamed_step_ms) +
        ", \"link_gbps\": " + std::to_string(link_gbps) + "}" + (i + 1 < results.size() ? ",\n" : "\n");
  }
  json += "  ]\n}\n";
  if (!json_path.empty())
    std::ofstream(json_path) << json;
  model.reset();
  cudaFree(base);
  cudaFreeHost(host);
  return 0;
}
