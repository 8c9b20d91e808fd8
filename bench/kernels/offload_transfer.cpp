// bench/offload: quantize-on-offload on the link. Llama-3-8B blocks (32
// layers, 8 kv heads, head_dim 128, bf16) move HBM -> DRAM and back through
// kvtier's mover raw (the chooser's best path, calibrated) and with each
// codec (fp8, int8, int4, int4_row: the quantize kernel before the copy, dequantize
// after), in the same run, with DRAM slots in one run and scattered. The
// figure of merit is KV per second in HBM's own bytes against the raw
// mover's: with fewer bytes on the link it can pass the link's own limit.
// Also: the largest and mean absolute error of a round trip on normal data.
// Prints a table and writes JSON (--json PATH). Needs a GPU; exits 0 without one.

#include "kernels/copy/cuda_mover.hpp"
#include "kernels/quant/offload_codec.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace kvtier;
using namespace kvtier::copy;

namespace {

constexpr uint32_t layers = 32, kv_heads = 8, head_dim = 128;

struct result {
  std::string codec, slots, direction;
  uint32_t block_tokens = 0;
  double link_gbps = 0; // bytes on the link per second
  double kv_gbps = 0;   // HBM-format KV per second
  double ratio = 0;     // kv_gbps / the raw mover's, same shape
};

double move_seconds(tier_mover& m, tier from, tier to, const std::vector<slot_pair>& moves, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps + 1; ++i) {
    move_request r{from, to, moves};
    std::promise<void> done;
    auto start = std::chrono::steady_clock::now();
    m.submit(std::move(r), [&](const move_result& res) {
      if (!res.ok)
        std::fprintf(stderr, "move failed: %s\n", res.error.c_str());
      done.set_value();
    });
    done.get_future().wait();
    if (i > 0) // the first is a warm-up
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

uint16_t bf16_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float float_of(uint16_t b) {
  uint32_t u = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i < argc; ++i)
    if (std::string{argv[i]} == "--json" && i + 1 < argc)
      json_path = argv[++i];
  std::vector<result> rows;
  std::vector<std::string> errors;
  for (uint32_t block_tokens : {16u, 64u}) {
    const uint64_t raw_layer = uint64_t{2} * kv_heads * block_tokens * head_dim * 2;
    const uint32_t blocks = static_cast<uint32_t>((1ull << 30) / (raw_layer * layers)); // 1 GiB of KV
    std::vector<slot_pair> down_run, down_scattered;
    std::vector<uint32_t> scattered(blocks * 2);
    std::iota(scattered.begin(), scattered.end(), 0u);
    std::shuffle(scattered.begin(), scattered.end(), std::mt19937_64{7});
    for (uint32_t i = 0; i < blocks; ++i) {
      down_run.push_back({i, i});
      down_scattered.push_back({i, scattered[i]});
    }
    double raw_kv[2][2] = {}; // [slots][direction]
    for (const char* name : {"raw", "fp8", "int8", "int4", "int4_row"}) {
      mover_options o;
      o.shape = {blocks, blocks * 2, layers, raw_layer};
      std::string codec_name = name;
      if (codec_name != "raw") {
        auto format = codec_name == "fp8" ? quant::scheme::fp8_token
            : codec_name == "int8"        ? quant::scheme::int8_token
            : codec_name == "int4_row"    ? quant::scheme::int4_row
                                          : quant::scheme::int4_token;
        std::string why;
        o.shape.codec =
            quant::make_offload_codec(format, quant::element_type::bf16, kv_heads, block_tokens, head_dim, &why);
      }
      std::string why;
      auto mover = make_cuda_mover(o, &why);
      if (!mover) {
        std::printf("bench/offload: no GPU (%s); nothing measured\n", why.c_str());
        return 0;
      }
      // Normal(0, 1) values with an outlier channel, as K and V look.
      std::mt19937_64 rng{11};
      std::normal_distribution<float> normal{0.0f, 1.0f};
      std::vector<std::byte> block(raw_layer * layers);
      auto* v = reinterpret_cast<uint16_t*>(block.data());
      for (size_t i = 0; i < block.size() / 2; ++i)
        v[i] = bf16_of(normal(rng) * (i % head_dim == 5 ? 8.0f : 1.0f));
      for (uint32_t s = 0; s < blocks; ++s)
        mover->write_slot(tier::hbm, s, block);
      for (int scattered_slots = 0; scattered_slots < 2; ++scattered_slots) {
        const auto& down = scattered_slots ? down_scattered : down_run;
        std::vector<slot_pair> up;
        for (const auto& m : down)
          up.push_back({m.to_slot, m.from_slot});
        double kv_bytes = static_cast<double>(blocks) * raw_layer * layers;
        double link_bytes = static_cast<double>(blocks) * mover->layout(tier::dram).block_bytes();
        for (int dir = 0; dir < 2; ++dir) {
          double s = dir == 0 ? move_seconds(*mover, tier::hbm, tier::dram, down, 3)
                              : move_seconds(*mover, tier::dram, tier::hbm, up, 3);
          result r{codec_name, scattered_slots ? "scattered" : "one run", dir == 0 ? "d2h" : "h2d", block_tokens};
          r.link_gbps = link_bytes / s / 1e9;
          r.kv_gbps = kv_bytes / s / 1e9;
          if (codec_name == "raw")
            raw_kv[scattered_slots][dir] = r.kv_gbps;
          r.ratio = r.kv_gbps / raw_kv[scattered_slots][dir];
          rows.push_back(r);
        }
      }
      if (codec_name != "raw") { // the round trip's error on slot 0
        std::vector<std::byte> back(block.size());
        mover->read_slot(tier::hbm, 0, back);
        const auto* w = reinterpret_cast<const uint16_t*>(back.data());
        double worst = 0, sum = 0;
        for (size_t i = 0; i < block.size() / 2; ++i) {
          double e = std::fabs(float_of(w[i]) - float_of(v[i]));
          worst = std::max(worst, e);
          sum += e;
        }
        char line[160];
        std::snprintf(line, sizeof line, "%s/%u tokens: round-trip abs error max %.4f mean %.5f", name, block_tokens,
                      worst, sum / (block.size() / 2));
        errors.push_back(line);
      }
    }
  }
  std::printf("%-6s %-5s %-10s %-4s %10s %10s %8s\n", "codec", "block", "slots", "dir", "link GB/s", "KV GB/s",
              "vs raw");
  for (const auto& r : rows)
    std::printf("%-6s %-5u %-10s %-4s %10.2f %10.2f %7.2fx\n", r.codec.c_str(), r.block_tokens, r.slots.c_str(),
                r.direction.c_str(), r.link_gbps, r.kv_gbps, r.ratio);
  for (const auto& e : errors)
    std::printf("%s\n", e.c_str());
  if (!json_path.empty()) {
    if (FILE* f = std::fopen(json_path.c_str(), "w")) {
      std::fprintf(f, "{\"bench\": \"offload\", \"rows\": [");
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        std::fprintf(f,
                     "%s\n  {\"codec\": \"%s\", \"block_tokens\": %u, \"slots\": \"%s\", \"direction\": \"%s\", "
                     "\"link_gbps\": %.3f, \"kv_gbps\": %.3f, \"ratio_vs_raw\": %.3f}",
                     i ? "," : "", r.codec.c_str(), r.block_tokens, r.slots.c_str(), r.direction.c_str(), r.link_gbps,
                     r.kv_gbps, r.ratio);
      }
      std::fprintf(f, "\n], \"errors\": [");
      for (size_t i = 0; i < errors.size(); ++i)
        std::fprintf(f, "%s\"%s\"", i ? ", " : "", errors[i].c_str());
      std::fprintf(f, "]}\n");
      std::fclose(f);
    }
  }
  return 0;
}
