// bench/peer: GPU to GPU handoff of KV blocks at Llama-3-8B geometry (16-token
// blocks, 8 KV heads x head_dim 128, bf16, 32 layers: 32 KiB of K or of V per
// layer, 64 KiB per slot per layer in kvtier's pool, 2 MiB per block).
//
// 1. Scattered block copy, GPU 0 -> GPU 1, by the peer copier
//    (kernels/copy/peer_copy.hpp): the same bytes as 32 KiB pieces, as the
//    pool's 64 KiB slices, and as whole 2 MiB blocks (block-major pools), each
//    by the kernel pushing, the kernel pulling and a DMA per run; against one
//    contiguous cudaMemcpyPeerAsync of the same total bytes in the same run.
//    Times are first CUDA call to landed as the caller sees them (the
//    copier's piece-list upload included), the median of --reps; the host's
//    planning before it (check, runs, pieces) is printed apart.
// 2. Handoff: prefill a --handoff-tokens prompt on GPU 0 (random weights, the
//    full model), then time prefill end -> first decoded token on GPU 1 (the
//    peer copy of the prompt's blocks to scattered slots, then one decode
//    step there), beside one decode step on GPU 0 from its own blocks (what
//    the handoff adds to a step is the difference).
//
//   bench/peer [--blocks 1024] [--reps 5] [--handoff-tokens 4096,32768] [--json out.json]

#include "bench/kernels/llama3_8b.hpp"
#include "kernels/copy/peer_copy.hpp"
#include "kernels/model/cuda/cuda_forward.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kvtier;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess)
    return true;
  std::fprintf(stderr, "bench/peer: %s: %s (%s)\n", what, cudaGetErrorName(e), cudaGetErrorString(e));
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Device memory of one GPU, freed with that GPU current.
struct device_buffer {
  int device = 0;
  void* p = nullptr;
  device_buffer() = default;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  bool allocate(int d, uint64_t bytes) {
    device = d;
    return cuda_ok(cudaSetDevice(d), "cudaSetDevice") && cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc") &&
        cuda_ok(cudaMemset(p, 0x11 * (d + 1), bytes), "cudaMemset") && cuda_ok(cudaDeviceSynchronize(), "memset");
  }
  ~device_buffer() {
    if (p) {
      cudaSetDevice(device);
      cudaFree(p);
    }
  }
  std::byte* bytes() const { return static_cast<std::byte*>(p); }
};

/// `count` distinct slots of `slots`, shuffled: nothing adjacent to coalesce but by chance.
std::vector<uint32_t> scattered(uint32_t slots, uint32_t count, uint32_t seed) {
  std::vector<uint32_t> all(slots);
  std::iota(all.begin(), all.end(), 0u);
  std::mt19937 rng(seed);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(count);
  return all;
}

constexpr uint32_t layers = 32;      // Llama-3-8B
constexpr uint64_t slice = 64 << 10; // K and V of 16 tokens x 8 KV heads x 128 x bf16: one slot of one layer

struct copy_row {
  std::string unit, path;
  uint64_t piece_bytes = 0, bytes = 0, runs = 0;
  double seconds = 0, plan_seconds = 0, gbps = 0, ratio = 0;
};

struct handoff_row {
  uint64_t tokens = 0, bytes = 0;
  double prefill_s = 0, copy_ms = 0, first_token_ms = 0, handoff_ms = 0, local_step_ms = 0;
};

/// Part 1: the peer copier's ways at three piece sizes, and the contiguous baseline.
bool scattered_copies(uint32_t blocks, int reps, double& contiguous_gbps, std::vector<copy_row>& rows) {
  const uint32_t slots = blocks * 2;
  const uint64_t pool_bytes = uint64_t{slots} * layers * slice;
  const uint64_t total = uint64_t{blocks} * layers * slice;
  device_buffer pool0, pool1;
  if (!pool0.allocate(0, pool_bytes) || !pool1.allocate(1, pool_bytes))
    return false;
  const auto from_slots = scattered(slots, blocks, 1), to_slots = scattered(slots, blocks, 2);
  std::vector<copy::slot_pair> moves;
  for (uint32_t b = 0; b < blocks; ++b)
    moves.push_back({from_slots[b], to_slots[b]});

  std::vector<double> times;
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice") || !cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate"))
    return false;
  for (int r = 0; r <= reps; ++r) {
    const double t = now_s();
    if (!cuda_ok(cudaMemcpyPeerAsync(pool1.p, 1, pool0.p, 0, total, stream), "cudaMemcpyPeerAsync") ||
        !cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize"))
      return false;
    if (r > 0) // the first is a warm-up
      times.push_back(now_s() - t);
  }
  cudaStreamDestroy(stream);
  const double contiguous_s = median(times);
  contiguous_gbps = total / contiguous_s / 1e9;
  std::printf("  contiguous cudaMemcpyPeerAsync of %.2f GiB: %.3f ms, %.1f GB/s (the baseline)\n",
              total / double(1ull << 30), contiguous_s * 1e3, contiguous_gbps);

  struct unit {
    const char* name;
    tier_layout layout;
  };
  // The same pool memory seen three ways: K and V as separate 32 KiB pieces,
  // the pool's 64 KiB slices (layer-major), whole 2 MiB blocks (block-major).
  const std::vector<unit> units{
      {"32KiB", {slot_order::layer_major, slots, layers * 2, slice / 2}},
      {"64KiB", {slot_order::layer_major, slots, layers, slice}},
      {"2MiB", {slot_order::block_major, slots, layers, slice}},
  };
  struct way {
    copy::peer_path path;
    bool pull;
  };
  for (const auto& u : units)
    for (auto w :
         {way{copy::peer_path::kernel, false}, way{copy::peer_path::kernel, true}, way{copy::peer_path::dma, false}}) {
      std::string why;
      auto copier = copy::make_cuda_peer_copier({0, 1, w.path, w.pull, 0}, &why);
      if (!copier) {
        std::fprintf(stderr, "bench/peer: %s\n", why.c_str());
        return false;
      }
      copy::peer_request request{{pool0.bytes(), u.layout}, {pool1.bytes(), u.layout}, moves};
      times.clear();
      std::vector<double> plan_times;
      copy::peer_result result;
      for (int r = 0; r <= reps; ++r) {
        result = copier->copy(request);
        if (!result.ok) {
          std::fprintf(stderr, "bench/peer: %s: %s\n", copier->name().c_str(), result.error.c_str());
          return false;
        }
        if (r > 0) {
          times.push_back(result.seconds);
          plan_times.push_back(result.plan_seconds);
        }
      }
      copy_row row{
          u.name,       copier->name(), u.layout.layer_bytes * (u.layout.order == slot_order::block_major ? layers : 1),
          result.bytes, result.runs,    median(times)};
      row.plan_seconds = median(plan_times);
      row.gbps = row.bytes / row.seconds / 1e9;
      row.ratio = row.gbps / contiguous_gbps;
      std::printf("  %-6s %-28s %6llu runs: %8.3f ms, %6.1f GB/s, %.2fx contiguous (host planning before it %.3f ms)\n",
                  u.name, row.path.c_str(), static_cast<unsigned long long>(row.runs), row.seconds * 1e3, row.gbps,
                  row.ratio, row.plan_seconds * 1e3);
      rows.push_back(row);
    }
  return true;
}

} // namespace

int main(int argc, char** argv) {
  uint32_t blocks = 1024;
  int reps = 5;
  std::vector<uint64_t> handoff_tokens{4096, 32768};
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc)
      blocks = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--handoff-tokens") && i + 1 < argc) {
      const std::string list = argv[++i];
      handoff_tokens.clear();
      for (size_t at = 0; at < list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        handoff_tokens.push_back(std::strtoull(list.substr(at, comma - at).c_str(), nullptr, 10));
        at = comma + 1;
      }
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else {
      std::fprintf(stderr, "bench/peer: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    std::printf("bench/peer: needs two GPUs: skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("bench/peer: GPU 0 -> GPU 1 (%s), Llama-3-8B geometry, %u blocks (%u tokens) per copy\n", prop.name,
              blocks, blocks * 16);

  // 1. Scattered copies against one contiguous copy of the same bytes.
  const uint64_t total = uint64_t{blocks} * layers * slice;
  double contiguous_gbps = 0;
  std::vector<copy_row> rows;
  if (!scattered_copies(blocks, reps, contiguous_gbps, rows))
    return 1;

  // 2. Handoff: prefill end on GPU 0 -> first token decoded on GPU 1.
  std::vector<handoff_row> handoffs;
  const auto config = bench::llama3_8b();
  for (uint64_t tokens : handoff_tokens) {
    handoff_row h;
    h.tokens = tokens;
    const uint32_t prompt_blocks = static_cast<uint32_t>((tokens + 15) / 16), table_blocks = prompt_blocks + 1;
    const uint32_t pool_slots = table_blocks + 64;
    static_assert(slice == model::paged_kv_pool::layer_bytes_for(8, 128, 16));
    model::paged_kv_pool view;
    view.kv_heads = config.kv_heads;
    view.head_dim = config.head_dim;
    view.block_tokens = 16;
    view.layout = {slot_order::layer_major, pool_slots, config.layers, slice};
    device_buffer kv0, kv1;
    if (!kv0.allocate(0, view.layout.total_bytes()) || !kv1.allocate(1, view.layout.total_bytes()))
      return 1;
    auto view0 = view, view1 = view;
    view0.base = kv0.bytes();
    view1.base = kv1.bytes();
    std::string why;
    cudaSetDevice(0);
    auto gpu0 = model::cuda_forward::create_random(config, 7, view0, why);
    cudaSetDevice(1);
    auto gpu1 = gpu0 ? model::cuda_forward::create_random(config, 7, view1, why) : nullptr;
    if (!gpu0 || !gpu1) {
      std::fprintf(stderr, "bench/peer: cuda_forward: %s\n", why.c_str());
      return 1;
    }
    const auto table0 = scattered(pool_slots, table_blocks, 3), table1 = scattered(pool_slots, table_blocks, 4);
    std::vector<uint32_t> prompt(tokens);
    for (uint64_t i = 0; i < tokens; ++i)
      prompt[i] = static_cast<uint32_t>((i * 7919 + 13) % config.vocab);
    cudaSetDevice(0);
    const double prefill_start = now_s();
    uint32_t first = 0;
    for (uint64_t done = 0; done < tokens;) {
      const uint64_t take = std::min<uint64_t>(4096, tokens - done);
      model::sequence_input in{std::span(prompt).subspan(done, take), done, done, table0, false};
      first = gpu0->run_greedy(std::span(&in, 1))[0].token;
      done += take;
    }
    if (!cuda_ok(cudaDeviceSynchronize(), "prefill"))
      return 1;
    h.prefill_s = now_s() - prefill_start;
    std::vector<copy::slot_pair> prompt_moves;
    for (uint32_t b = 0; b < prompt_blocks; ++b)
      prompt_moves.push_back({table0[b], table1[b]});
    auto copier = copy::make_cuda_peer_copier({0, 1, copy::peer_path::kernel, false, 0}, &why);
    if (!copier) {
      std::fprintf(stderr, "bench/peer: %s\n", why.c_str());
      return 1;
    }
    std::vector<uint32_t> next{first};
    model::sequence_input step0{next, tokens, tokens, table0, false}, step1{next, tokens, tokens, table1, false};
    std::vector<double> copy_t, first_t, local_t;
    uint32_t token1 = 0, token0 = 0;
    for (int r = 0; r <= reps; ++r) {
      const double t0 = now_s();
      auto moved = copier->copy({{kv0.bytes(), view.layout}, {kv1.bytes(), view.layout}, prompt_moves});
      if (!moved.ok) {
        std::fprintf(stderr, "bench/peer: handoff copy: %s\n", moved.error.c_str());
        return 1;
      }
      h.bytes = moved.bytes;
      const double t1 = now_s();
      cudaSetDevice(1);
      token1 = gpu1->run_greedy(std::span(&step1, 1))[0].token;
      const double t2 = now_s();
      cudaSetDevice(0);
      token0 = gpu0->run_greedy(std::span(&step0, 1))[0].token;
      const double t3 = now_s();
      if (r > 0) {
        copy_t.push_back(t1 - t0);
        first_t.push_back(t2 - t1);
        local_t.push_back(t3 - t2);
      }
    }
    if (!cuda_ok(cudaDeviceSynchronize(), "decode"))
      return 1;
    h.copy_ms = median(copy_t) * 1e3;
    h.first_token_ms = median(first_t) * 1e3;
    h.local_step_ms = median(local_t) * 1e3;
    h.handoff_ms = h.copy_ms + h.first_token_ms;
    std::printf("  handoff %6llu tokens (%.2f GiB of KV): prefill %.2f s; prefill end -> first token on GPU 1 %.2f ms "
                "(copy %.2f ms = %.1f GB/s, decode step %.2f ms); a decode step on GPU 0 %.2f ms; tokens %s\n",
                static_cast<unsigned long long>(tokens), h.bytes / double(1ull << 30), h.prefill_s, h.handoff_ms,
                h.copy_ms, h.bytes / (h.copy_ms / 1e3) / 1e9, h.first_token_ms, h.local_step_ms,
                token0 == token1 ? "equal" : "DIFFER");
    handoffs.push_back(h);
    cudaSetDevice(1);
    gpu1.reset();
    cudaSetDevice(0);
    gpu0.reset();
  }

  std::string json = "{\n  \"bench\": \"peer\",\n  \"gpu\": \"" + std::string(prop.name) +
      "\",\n  \"blocks\": " + std::to_string(blocks) + ",\n  \"bytes\": " + std::to_string(total) +
      ",\n  \"contiguous_gbps\": " + std::to_string(contiguous_gbps) + ",\n  \"copies\": [\n";
  for (size_t i = 0; i < rows.size(); ++i)
    json += "    {\"unit\": \"" + rows[i].unit + "\", \"path\": \"" + rows[i].path +
        "\", \"piece_bytes\": " + std::to_string(rows[i].piece_bytes) + ", \"runs\": " + std::to_string(rows[i].runs) +
        ", \"ms\": " + std::to_string(rows[i].seconds * 1e3) +
        ", \"plan_ms\": " + std::to_string(rows[i].plan_seconds * 1e3) + ", \"gbps\": " + std::to_string(rows[i].gbps) +
        ", \"ratio_to_contiguous\": " + std::to_string(rows[i].ratio) + "}" + (i + 1 < rows.size() ? ",\n" : "\n");
  json += "  ],\n  \"handoff\": [\n";
  for (size_t i = 0; i < handoffs.size(); ++i)
    json += "    {\"tokens\": " + std::to_string(handoffs[i].tokens) +
        ", \"bytes\": " + std::to_string(handoffs[i].bytes) +
        ", \"prefill_s\": " + std::to_string(handoffs[i].prefill_s) +
        ", \"copy_ms\": " + std::to_string(handoffs[i].copy_ms) +
        ", \"first_token_ms\": " + std::to_string(handoffs[i].first_token_ms) +
        ", \"handoff_ms\": " + std::to_string(handoffs[i].handoff_ms) +
        ", \"local_step_ms\": " + std::to_string(handoffs[i].local_step_ms) + "}" +
        (i + 1 < handoffs.size() ? ",\n" : "\n");
  json += "  ]\n}\n";
  if (!json_path.empty())
    std::ofstream(json_path) << json;
  std::printf("%s", json.c_str());
  return 0;
}
