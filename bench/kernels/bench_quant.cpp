// bench_quant: throughput of quantize and dequantize for every format, each
// against a plain copy of the same fp16 tile measured in the same run.
//
//   CPU twin (one thread) against memcpy of the fp16 bytes;
//   CUDA kernels against cudaMemcpyAsync device-to-device (when built with
//   CUDA and a GPU is present).
//
// Bandwidth counts bytes read + bytes written: quantize reads the fp16 tile
// and writes the packed one; dequantize the reverse; the copy reads and
// writes the fp16 tile. ratio = kernel bandwidth / copy bandwidth (the goal
// on the H200 is >= 0.8). Prints a table, then JSON (also to --json FILE).
// Plain C++17 with no third-party headers, so it builds on the GPU machine.

#include "kernels/quant/half.hpp"
#include "kernels/quant/quant_cpu.hpp"
#ifdef KVTIER_HAVE_CUDA_QUANT
#include "kernels/quant/quant_cuda.hpp"
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace kvtier::quant;

namespace {

struct row {
  std::string side; // cpu | gpu
  std::string format;
  tile_shape shape;
  double copy_ms, quantize_ms, dequantize_ms;
  uint64_t fp16_bytes, packed_bytes;

  double copy_gbs() const { return 2.0 * fp16_bytes / copy_ms / 1e6; }
  double quant_gbs() const { return double(fp16_bytes + packed_bytes) / quantize_ms / 1e6; }
  double dequant_gbs() const { return double(fp16_bytes + packed_bytes) / dequantize_ms / 1e6; }
};

template <class F>
double median_ms(int reps, F&& body) {
  std::vector<double> ms;
  for (int i = 0; i < reps + 1; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    body();
    auto t1 = std::chrono::steady_clock::now();
    if (i > 0) // the first run is warm-up
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

const scheme all_schemes[] = {scheme::fp8_token, scheme::fp8_tensor, scheme::int8_token, scheme::int4_token,
                              scheme::int4_channel};

void run_cpu(const tile_shape& shape, int reps, std::vector<row>& rows) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<uint16_t> in(shape.elements()), out(shape.elements());
  for (auto& v : in)
    v = float_to_half_rn(n(rng));
  double copy_ms = median_ms(reps, [&] { std::memcpy(out.data(), in.data(), in.size() * 2); });
  for (auto s : all_schemes) {
    std::vector<uint8_t> packed(packed_bytes(s, shape));
    row r{"cpu", std::string(name_of(s)), shape, copy_ms, 0, 0, in.size() * 2, packed.size()};
    r.quantize_ms = median_ms(reps, [&] { quantize(s, shape, in.data(), packed.data()); });
    r.dequantize_ms = median_ms(reps, [&] { dequantize(s, shape, packed.data(), out.data()); });
    rows.push_back(r);
  }
}

#ifdef KVTIER_HAVE_CUDA_QUANT
bool run_gpu(const tile_shape& shape, int reps, std::vector<row>& rows, std::string& device) {
  if (!gpu::available())
    return false;
  for (auto s : all_schemes) {
    gpu::timing t;
    std::string error;
    if (int rc = gpu::time_kernels(s, shape, reps, &t, &error)) {
      std::fprintf(stderr, "bench_quant: %s on the GPU: error %d: %s\n", std::string(name_of(s)).c_str(), rc,
                   error.c_str());
      return false;
    }
    device = t.device;
    rows.push_back({"gpu", std::string(name_of(s)), shape, t.copy_ms, t.quantize_ms, t.dequantize_ms,
                    shape.elements() * 2, packed_bytes(s, shape)});
  }
  return true;
}
#endif

std::string json(const std::vector<row>& rows, const std::string& device) {
  std::string j = "{\n  \"benchmark\": \"bench_quant\",\n  \"bandwidth\": \"bytes read + written per second\",\n";
  j += "  \"gpu_device\": \"" + device + "\",\n  \"rows\": [\n";
  char buf[1024];
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    std::snprintf(buf, sizeof buf,
                  "    {\"side\": \"%s\", \"format\": \"%s\", \"slices\": %u, \"tokens\": %u, \"channels\": %u, "
                  "\"fp16_bytes\": %llu, \"packed_bytes\": %llu, \"copy_ms\": %.4f, \"quantize_ms\": %.4f, "
                  "\"dequantize_ms\": %.4f, \"copy_gbs\": %.1f, \"quantize_gbs\": %.1f, \"dequantize_gbs\": %.1f, "
                  "\"quantize_ratio\": %.3f, \"dequantize_ratio\": %.3f}%s\n",
                  r.side.c_str(), r.format.c_str(), r.shape.slices, r.shape.tokens, r.shape.channels,
                  static_cast<unsigned long long>(r.fp16_bytes), static_cast<unsigned long long>(r.packed_bytes),
                  r.copy_ms, r.quantize_ms, r.dequantize_ms, r.copy_gbs(), r.quant_gbs(), r.dequant_gbs(),
                  r.quant_gbs() / r.copy_gbs(), r.dequant_gbs() / r.copy_gbs(), i + 1 < rows.size() ? "," : "");
    j += buf;
  }
  j += "  ]\n}\n";
  return j;
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  bool cpu = true, gpu_side = true;
  int reps = 20;
  uint32_t cpu_slices = 512, gpu_slices = 8192;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json" && i + 1 < argc)
      json_path = argv[++i];
    else if (a == "--cpu-only")
      gpu_side = false;
    else if (a == "--gpu-only")
      cpu = false;
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--cpu-slices" && i + 1 < argc)
      cpu_slices = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else if (a == "--gpu-slices" && i + 1 < argc)
      gpu_slices = static_cast<uint32_t>(std::max(1, std::atoi(argv[++i])));
    else {
      std::fprintf(stderr,
                   "usage: bench_quant [--json FILE] [--cpu-only|--gpu-only] [--reps N] [--cpu-slices N] "
                   "[--gpu-slices N]\n  a tile is SLICES x 256 tokens x 128 channels of fp16\n");
      return 2;
    }
  }
  std::vector<row> rows;
  std::string device = "none";
  if (cpu)
    run_cpu({cpu_slices, 256, 128}, std::min(reps, 5), rows);
  if (gpu_side) {
#ifdef KVTIER_HAVE_CUDA_QUANT
    if (!run_gpu({gpu_slices, 256, 128}, reps, rows, device))
      std::printf("bench_quant: no usable GPU; CUDA rows skipped\n");
#else
    (void)gpu_slices;
    std::printf("bench_quant: built without CUDA; CUDA rows skipped\n");
#endif
  }
  std::printf("%-4s %-13s %10s %9s %9s %9s %9s %9s %7s %7s\n", "side", "format", "fp16 MiB", "copy ms", "quant ms",
              "deq ms", "copy GB/s", "quant GB/s", "q/copy", "dq/copy");
  for (const auto& r : rows)
    std::printf("%-4s %-13s %10.1f %9.3f %9.3f %9.3f %9.1f %9.1f %6.0f%% %6.0f%%\n", r.side.c_str(), r.format.c_str(),
                r.fp16_bytes / 1048576.0, r.copy_ms, r.quantize_ms, r.dequantize_ms, r.copy_gbs(), r.quant_gbs(),
                100 * r.quant_gbs() / r.copy_gbs(), 100 * r.dequant_gbs() / r.copy_gbs());
  std::string j = json(rows, device);
  std::printf("%s", j.c_str());
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (!f || std::fputs(j.c_str(), f) < 0) {
      std::fprintf(stderr, "bench_quant: cannot write %s\n", json_path.c_str());
      return 2;
    }
    std::fclose(f);
  }
  return 0;
}
