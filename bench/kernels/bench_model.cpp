// bench/model: the model's GPU twin at Llama-3-8B geometry (random weights,
// bf16), against PyTorch on the same machine and shapes
// (bench/kernels/model_torch_baseline.py, SDPA attention, decode captured in
// a CUDA graph), whose JSON --baseline reads. Measures:
//  - a decode step (batch x context), whole model, wall clock around launch
//    and synchronize;
//  - the paged decode attention kernel alone (the tensor-core one the forward
//    runs) on one layer: GB/s over the KV
//    bytes it reads, and that as a share of the H200's 4.8 TB/s;
//  - a prefill chunk after cached tokens (batch 1).
// Prints a table and, with --json, the same as JSON with ratios to PyTorch.
//
//   bench/model [--baseline torch.json] [--json out.json] [--quick] [--prefill]
// (--prefill: the prefill steps only, as model_torch_baseline.py --prefill)

#include "bench/kernels/llama3_8b.hpp"
#include "kernels/model/cuda/cuda_forward.hpp"
#include "kernels/model/cuda/model_kernels.hpp"
#include "kernels/model/cuda/paged_decode.hpp"

#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace kvtier;
using namespace kvtier::model;

namespace {

constexpr double hbm_peak_gbps = 4800;

double seconds_of(const std::function<void()>& f, int reps) {
  f(); // warm-up
  cudaDeviceSynchronize();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    f();
  cudaDeviceSynchronize();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}

/// The baseline's milliseconds for a key like "decode b8 c4096", from its flat JSON map.
std::map<std::string, double> read_baseline(const std::string& path) {
  std::map<std::string, double> out;
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  // The script writes {"key": ms, ...} on one line per entry.
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    auto q1 = line.find('"'), q2 = line.find('"', q1 + 1), colon = line.find(':', q2);
    if (q1 == std::string::npos || q2 == std::string::npos || colon == std::string::npos)
      continue;
    out[line.substr(q1 + 1, q2 - q1 - 1)] = std::atof(line.c_str() + colon + 1);
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  std::string baseline_path, json_path;
  bool quick = false, prefill_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--baseline") && i + 1 < argc)
      baseline_path = argv[++i];
    else if (!std::strcmp(argv[i], "--json") && i + 1 < argc)
      json_path = argv[++i];
    else if (!std::strcmp(argv[i], "--quick"))
      quick = true;
    else if (!std::strcmp(argv[i], "--prefill"))
      prefill_only = true;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no usable GPU\n");
    return 77;
  }
  auto baseline = baseline_path.empty() ? std::map<std::string, double>{} : read_baseline(baseline_path);
  const llama_config c = bench::llama3_8b();
  const uint32_t B = 16;
  const uint64_t pool_tokens = quick ? 64 * 1024 : 640 * 1024; // 80 GiB of bf16 KV at 128 KiB per token
  paged_kv_pool pool;
  pool.kv_heads = c.kv_heads;
  pool.head_dim = c.head_dim;
  pool.block_tokens = B;
  pool.layout = {slot_order::layer_major, static_cast<uint32_t>(pool_tokens / B), c.layers,
                 paged_kv_pool::layer_bytes_for(c.kv_heads, c.head_dim, B)};
  void* base = nullptr;
  if (cudaMalloc(&base, pool.layout.total_bytes()) != cudaSuccess) {
    std::printf("cannot allocate the KV pool\n");
    return 1;
  }
  cudaMemset(base, 0, pool.layout.total_bytes());
  pool.base = static_cast<std::byte*>(base);
  std::string why;
  auto model = cuda_forward::create_random(c, 1, pool, why);
  if (!model) {
    std::printf("cuda_forward: %s\n", why.c_str());
    return 1;
  }
  std::string json = "{\n  \"geometry\": \"llama-3-8b\",\n  \"results\": [\n";
  bool first = true;
  auto emit = [&](const std::string& key, double ms, const std::string& extra) {
    double base_ms = baseline.count(key) ? baseline[key] : 0;
    std::printf("%-28s %10.3f ms   pytorch %10.3f ms   ratio %6.3f  %s\n", key.c_str(), ms, base_ms,
                base_ms > 0 ? ms / base_ms : 0.0, extra.c_str());
    json += std::string(first ? "" : ",\n") + "    {\"shape\": \"" + key + "\", \"kvtier_ms\": " + std::to_string(ms) +
        ", \"pytorch_ms\": " + std::to_string(base_ms) +
        ", \"ratio\": " + std::to_string(base_ms > 0 ? ms / base_ms : 0.0) + extra + "}";
    first = false;
  };
  std::vector<uint32_t> batches = prefill_only ? std::vector<uint32_t>{}
      : quick                                  ? std::vector<uint32_t>{1, 8}
                                               : std::vector<uint32_t>{1, 8, 32, 128};
  std::vector<uint32_t> contexts =
      quick ? std::vector<uint32_t>{1024, 4096} : std::vector<uint32_t>{1024, 4096, 8192, 16384, 32768};
  for (auto b : batches)
    for (auto ctx : contexts) {
      uint64_t blocks_per = ctx / B + 1;
      if (blocks_per * b > pool.layout.slots)
        continue;
      std::vector<std::vector<uint32_t>> tables(b), tokens(b, std::vector<uint32_t>{7});
      for (uint32_t s = 0; s < b; ++s)
        for (uint64_t j = 0; j < blocks_per; ++j)
          tables[s].push_back(static_cast<uint32_t>(s * blocks_per + j));
      std::vector<sequence_input> batch(b);
      for (uint32_t s = 0; s < b; ++s)
        batch[s] = {tokens[s], ctx, ctx, tables[s], false};
      double step = seconds_of([&] { model->launch(batch); }, 10);
      // The attention kernel alone, one layer.
      std::vector<int64_t> pos(b, ctx);
      std::vector<uint32_t> begin(b), flat;
      for (uint32_t s = 0; s < b; ++s) {
        begin[s] = static_cast<uint32_t>(flat.size());
        flat.insert(flat.end(), tables[s].begin(), tables[s].end());
      }
      int64_t* dpos;
      uint32_t *dbegin, *dflat;
      float *dq, *scratch;
      uint16_t* dout;
      cudaMalloc(&dpos, b * 8);
      cudaMalloc(&dbegin, b * 4);
      cudaMalloc(&dflat, flat.size() * 4);
      cudaMemcpy(dpos, pos.data(), b * 8, cudaMemcpyHostToDevice);
      cudaMemcpy(dbegin, begin.data(), b * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dflat, flat.data(), flat.size() * 4, cudaMemcpyHostToDevice);
      cudaMalloc(&dq, uint64_t{b} * c.q_heads * c.head_dim * 4);
      cudaMemset(dq, 0, uint64_t{b} * c.q_heads * c.head_dim * 4);
      cudaMalloc(&dout, uint64_t{b} * c.q_heads * c.head_dim * 2);
      // The kernel the forward runs for decode steps (tensor cores).
      cuda::paged_decode_args d;
      d.q_f32 = dq;
      d.out = dout;
      d.pool = base;
      d.layer_offset = 0;
      d.slot_stride = pool.layout.layer_bytes;
      d.block_tables = reinterpret_cast<const int32_t*>(dflat);
      d.table_begin = dbegin;
      d.positions = dpos;
      d.max_context = static_cast<int32_t>(ctx + 1);
      d.batch = static_cast<int32_t>(b);
      d.q_heads = static_cast<int32_t>(c.q_heads);
      d.kv_heads = static_cast<int32_t>(c.kv_heads);
      d.head_dim = static_cast<int32_t>(c.head_dim);
      d.block_tokens = static_cast<int32_t>(B);
      d.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
      int sms = 0;
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
      cudaMalloc(&scratch, cuda::paged_decode_tc_workspace_bytes(d, sms));
      double attn = seconds_of([&] { cuda::paged_decode_attention_tc(d, scratch, sms, nullptr); }, 20);
      double kv_bytes = double(b) * (ctx + 1) * c.kv_heads * c.head_dim * 2 * 2;
      double gbps = kv_bytes / attn / 1e9;
      for (void* p : {(void*)dpos, (void*)dbegin, (void*)dflat, (void*)dq, (void*)scratch, (void*)dout})
        cudaFree(p);
      char extra[200];
      std::snprintf(extra, sizeof extra, ", \"attention_us\": %.2f, \"attention_gbps\": %.1f, \"hbm_share\": %.3f",
                    attn * 1e6, gbps, gbps / hbm_peak_gbps);
      emit("decode b" + std::to_string(b) + " c" + std::to_string(ctx), step * 1e3, std::string(extra));
    }
  std::vector<uint32_t> chunks = quick ? std::vector<uint32_t>{512} : std::vector<uint32_t>{512, 2048, 8192};
  std::vector<uint32_t> cached = quick ? std::vector<uint32_t>{0, 8192} : std::vector<uint32_t>{0, 8192, 32768, 65536};
  for (auto chunk : chunks)
    for (auto k : cached) {
      uint64_t blocks = (k + chunk) / B + 1;
      if (blocks > pool.layout.slots)
        continue;
      std::vector<uint32_t> table(blocks), tokens(chunk, 11);
      for (uint64_t j = 0; j < blocks; ++j)
        table[j] = static_cast<uint32_t>(j);
      std::vector<sequence_input> batch{{tokens, k, k, table, false}};
      double t = seconds_of([&] { model->launch(batch); }, 3);
      emit("prefill n" + std::to_string(chunk) + " after " + std::to_string(k), t * 1e3, "");
    }
  json += "\n  ]\n}\n";
  if (!json_path.empty())
    std::ofstream(json_path) << json;
  cudaFree(base);
  return 0;
}
