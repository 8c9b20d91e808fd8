#include "compression/streaming_llm.hpp"

namespace kvtier::compression {
namespace {
std::vector<float> positions(uint32_t n) {
  std::vector<float> s(n);
  for (uint32_t t = 0; t < n; ++t)
    s[t] = static_cast<float>(t);
  return s;
}
} // namespace

std::vector<float> streaming_llm::score(const observed_attention& observed) const {
  return positions(observed.keys);
}
std::vector<float> sliding_window::score(const observed_attention& observed) const {
  return positions(observed.keys);
}

} // namespace kvtier::compression
