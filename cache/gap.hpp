#pragma once
// The share of the LRU -> Belady gap a policy closes: 0 is LRU, 1 is Belady,
// negative is below LRU. Undefined (nullopt) when Belady is not above LRU:
// there is no gap to close.

#include <optional>

namespace kvtier::cache {

inline std::optional<double> gap_closed(double policy, double lru, double belady) {
  if (!(belady > lru))
    return std::nullopt;
  return (policy - lru) / (belady - lru);
}

} // namespace kvtier::cache
