// The CUDA kernels against the CPU twin, byte for byte: packed tiles and
// dequantized fp16 must be identical. A plain executable (no gtest) so it
// also builds on the GPU machine. Exit 0 = all equal, 1 = a mismatch,
// 77 = no GPU here (ctest counts it as skipped).

#include "kernels/quant/half.hpp"
#include "kernels/quant/quant_cpu.hpp"
#include "kernels/quant/quant_cuda.hpp"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace kvtier::quant;

namespace {

// Normal values with outlier channels, a zero row, extreme fp16 values
// (65504, subnormals, -0) and exact ties, so rounding and saturation are exercised.
std::vector<uint16_t> input(const tile_shape& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<uint16_t> x(shape.elements());
  for (uint64_t i = 0; i < x.size(); ++i) {
    uint32_t c = static_cast<uint32_t>(i % shape.channels);
    float v = n(rng) * (c % 13 == 5 ? 30.0f : 1.0f);
    int p = pick(rng);
    if (p == 0)
      v = 65504.0f;
    else if (p == 1)
      v = std::ldexp(3.0f, -20);
    else if (p == 2)
      v = std::nearbyint(v * 4.0f) / 4.0f + 0.125f;
    else if (p == 3)
      v = -0.0f;
    x[i] = float_to_half_rn(v);
  }
  for (uint32_t c = 0; c < shape.channels; ++c)
    x[c] = 0; // row 0 is all zeros: scale 0
  return x;
}

} // namespace

int main() {
  if (!gpu::available()) {
    std::printf("quant_cuda_check: no CUDA device; skipped\n");
    return 77;
  }
  const scheme schemes[] = {scheme::fp8_token,  scheme::fp8_tensor,   scheme::int8_token,
                            scheme::int4_token, scheme::int4_channel, scheme::int4_row};
  const tile_shape shapes[] = {{1, 32, 128}, {3, 64, 128}, {5, 96, 64}, {2, 256, 256}, {64, 32, 128}};
  int failures = 0, cases = 0;
  for (auto s : schemes)
    for (const auto& shape : shapes) {
      if (!gpu::supports(s, shape))
        continue;
      for (uint32_t seed = 1; seed <= 3; ++seed) {
        ++cases;
        auto in = input(shape, seed * 7919u + static_cast<uint32_t>(s));
        std::vector<uint8_t> cpu_packed(packed_bytes(s, shape)), gpu_packed(cpu_packed.size());
        std::vector<uint16_t> cpu_out(in.size()), gpu_out(in.size());
        quantize(s, shape, in.data(), cpu_packed.data());
        dequantize(s, shape, cpu_packed.data(), cpu_out.data());
        std::string error;
        if (int rc = gpu::round_trip_host(s, shape, in.data(), gpu_packed.data(), gpu_out.data(), &error)) {
          std::printf("FAIL %-12s %ux%ux%u: CUDA error %d: %s\n", std::string(name_of(s)).c_str(), shape.slices,
                      shape.tokens, shape.channels, rc, error.c_str());
          ++failures;
          continue;
        }
        uint64_t packed_diff = 0, out_diff = 0, first = ~0ull;
        for (uint64_t i = 0; i < cpu_packed.size(); ++i)
          if (cpu_packed[i] != gpu_packed[i] && (++packed_diff, first == ~0ull))
            first = i;
        for (uint64_t i = 0; i < cpu_out.size(); ++i)
          out_diff += cpu_out[i] != gpu_out[i];
        bool ok = packed_diff == 0 && out_diff == 0;
        failures += ok ? 0 : 1;
        std::printf("%s %-12s %3ux%3ux%3u seed %u: %llu packed bytes, %llu differ; %llu fp16 outputs differ%s\n",
                    ok ? "ok  " : "FAIL", std::string(name_of(s)).c_str(), shape.slices, shape.tokens, shape.channels,
                    seed, static_cast<unsigned long long>(cpu_packed.size()),
                    static_cast<unsigned long long>(packed_diff), static_cast<unsigned long long>(out_diff),
                    ok ? "" : (" (first packed byte " + std::to_string(first) + ")").c_str());
      }
    }
  std::printf("quant_cuda_check: %d of %d cases bit-identical\n", cases - failures, cases);
  return failures == 0 ? 0 : 1;
}
