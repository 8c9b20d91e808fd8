#include "runtime/model_presets.hpp"

#include <algorithm>
#include <array>
#include <cctype>

namespace kvtier {
namespace {

// name, layers, query heads, kv heads, head_dim, parameters, hidden, max context, MLP width, vocabulary
const std::array<model_spec, 9> presets{{
    {"llama-3-8b", 32, 32, 8, 128, 8'030'000'000, 4096, 131072, 14336, 128256},
    {"llama-3-70b", 80, 64, 8, 128, 70'600'000'000, 8192, 131072, 28672, 128256},
    {"llama-3-405b", 126, 128, 8, 128, 405'000'000'000, 16384, 131072, 53248, 128256},
    {"mistral-large-2", 88, 96, 8, 128, 123'000'000'000, 12288, 131072, 28672, 32768},
    {"qwen2.5-7b", 28, 28, 4, 128, 7'620'000'000, 3584, 131072, 18944, 152064},
    {"qwen2.5-72b", 80, 64, 8, 128, 72'700'000'000, 8192, 131072, 29568, 152064},
    // A 70B model with full multi-head attention (64 KV heads), as in LLaMA-2-70B
    // without GQA: 8x the KV bytes of Llama-3-70B.
    {"mha-70b", 80, 64, 64, 128, 70'000'000'000, 8192, 131072, 28672, 32000},
    {"falcon-7b", 32, 71, 1, 64, 7'220'000'000, 4544, 2048, 18176, 65024}, // MQA
    {"tiny-test", 2, 4, 2, 8, 1'000'000, 32, 4096, 64, 256},               // for tests and examples
}};

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

} // namespace

std::span<const model_spec> model_presets() {
  return presets;
}

std::optional<model_spec> find_model_preset(std::string_view name) {
  for (const auto& preset : presets)
    if (iequal(preset.name, name))
      return preset;
  return std::nullopt;
}

} // namespace kvtier
