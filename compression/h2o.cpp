#include "compression/h2o.hpp"

#include <algorithm>

namespace kvtier::compression {

std::string h2o::name() const {
  switch (accumulation_) {
    case h2o_accumulation::raw:
      return "h2o_raw";
    case h2o_accumulation::normalized:
      return "h2o";
    case h2o_accumulation::window:
      return "h2o_window";
  }
  return "h2o";
}

std::vector<float> h2o::score(const observed_attention& observed) const {
  const uint32_t n = observed.keys;
  const uint32_t nq = observed.queries();
  uint32_t first = 0;
  if (accumulation_ == h2o_accumulation::window)
    first = nq > window_queries_ ? nq - window_queries_ : 0;
  std::vector<double> sum(n, 0.0);
  for (uint32_t h = 0; h < observed.group; ++h)
    for (uint32_t q = first; q < nq; ++q) {
      auto row = observed.row(h, q);
      uint32_t seen = observed.visible(observed.query_pos[q]);
      for (uint32_t j = 0; j < seen; ++j)
        sum[j] += row[j];
    }
  std::vector<float> out(n);
  if (accumulation_ != h2o_accumulation::normalized) {
    for (uint32_t j = 0; j < n; ++j)
      out[j] = static_cast<float>(sum[j]);
    return out;
  }
  // observers[j] = observed queries at positions >= j (query_pos is ascending).
  uint32_t q = 0;
  for (uint32_t j = 0; j < n; ++j) {
    while (q < nq && observed.query_pos[q] < j)
      ++q;
    uint32_t observers = (nq - q) * observed.group;
    out[j] = observers == 0 ? 0.0f : static_cast<float>(sum[j] / observers);
  }
  return out;
}

} // namespace kvtier::compression
