#include "compression/policy.hpp"

#include <algorithm>
#include <numeric>

namespace kvtier::compression {

std::vector<uint32_t> keep_top(std::span<const float> scores, uint32_t budget, protection p) {
  auto n = static_cast<uint32_t>(scores.size());
  budget = std::min(budget, n);
  std::vector<uint8_t> kept(n, 0);
  uint32_t taken = 0;
  auto take = [&](uint32_t t) {
    if (taken < budget && !kept[t]) {
      kept[t] = 1;
      ++taken;
    }
  };
  // Protected: the recent window first (newest first), then the sinks.
  for (uint32_t i = 0; i < std::min(p.recent, n); ++i)
    take(n - 1 - i);
  for (uint32_t t = 0; t < std::min(p.sinks, n); ++t)
    take(t);
  if (taken < budget) {
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return scores[a] > scores[b] || (scores[a] == scores[b] && a > b);
    });
    for (uint32_t t : order) {
      if (taken == budget)
        break;
      take(t);
    }
  }
  std::vector<uint32_t> out;
  out.reserve(budget);
  for (uint32_t t = 0; t < n; ++t)
    if (kept[t])
      out.push_back(t);
  return out;
}

std::vector<uint32_t> select_tokens(const policy& p, const observed_attention& observed, uint32_t budget) {
  auto s = p.score(observed);
  return keep_top(s, budget, p.protect());
}

} // namespace kvtier::compression
