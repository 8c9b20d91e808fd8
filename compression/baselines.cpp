#include "compression/baselines.hpp"

#include "runtime/check.hpp"
#include "runtime/splitmix.hpp"

namespace kvtier::compression {

std::vector<float> random_eviction::score(const observed_attention& observed) const {
  // splitmix64 of (seed, token): independent of any other random stream.
  std::vector<float> s(observed.keys);
  for (uint32_t j = 0; j < observed.keys; ++j) {
    s[j] = static_cast<float>(splitmix64(seed_ ^ (uint64_t{j} << 32 | j)) >> 40);
  }
  return s;
}

std::vector<float> oracle::score(const observed_attention& observed) const {
  KVTIER_CHECK(future_.keys == observed.keys, "oracle: future attention over a different cache");
  std::vector<float> s(future_.keys, 0.0f);
  for (uint32_t h = 0; h < future_.group; ++h)
    for (uint32_t q = 0; q < future_.queries(); ++q) {
      auto row = future_.row(h, q);
      for (uint32_t j = 0; j < future_.keys; ++j)
        s[j] += row[j];
    }
  return s;
}

} // namespace kvtier::compression
