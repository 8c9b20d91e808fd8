#include "compression/snapkv.hpp"

#include <algorithm>

namespace kvtier::compression {

std::vector<float> snapkv::score(const observed_attention& observed) const {
  const uint32_t n = observed.keys;
  const uint32_t nq = observed.queries();
  uint32_t first = nq > window_ ? nq - window_ : 0;
  std::vector<float> votes(n, 0.0f);
  for (uint32_t h = 0; h < observed.group; ++h)
    for (uint32_t q = first; q < nq; ++q) {
      auto row = observed.row(h, q);
      for (uint32_t j = 0; j < n; ++j)
        votes[j] += row[j];
    }
  if (pool_ <= 1)
    return votes;
  std::vector<float> out(n);
  int half = static_cast<int>(pool_ / 2);
  for (int j = 0; j < static_cast<int>(n); ++j) {
    float m = votes[j];
    for (int k = std::max(0, j - half); k <= std::min(static_cast<int>(n) - 1, j + half); ++k)
      m = std::max(m, votes[k]);
    out[j] = m;
  }
  return out;
}

} // namespace kvtier::compression
