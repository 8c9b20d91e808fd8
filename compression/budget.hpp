#pragma once
// How many tokens each (layer, kv head) keeps.
//
// tokens(layer, head, n) = min(n, max(min_tokens, ceil(r * n))), capped by
// max_tokens when that is set, where r is head_ratio[layer * kv_heads + head]
// if head_ratio is given, else layer_ratio[layer] if given, else ratio.

#include <cstdint>
#include <vector>

namespace kvtier::compression {

struct budget_spec {
  double ratio = 1.0;              // fraction of the tokens kept
  std::vector<double> layer_ratio; // optional, one per layer
  std::vector<double> head_ratio;  // optional, one per (layer, kv head)
  uint64_t min_tokens = 0;         // floor, e.g. sinks + recent window
  uint64_t max_tokens = 0;         // cap (a fixed-size cache); 0 = none

  /// REQUIRES: layer_ratio / head_ratio, when given, cover (layer, head).
  uint64_t tokens(uint32_t layer, uint32_t head, uint32_t kv_heads, uint64_t n) const;
};

} // namespace kvtier::compression
