#include "compression/budget.hpp"

#include "runtime/check.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier::compression {

uint64_t budget_spec::tokens(uint32_t layer, uint32_t head, uint32_t kv_heads, uint64_t n) const {
  double r = ratio;
  if (!head_ratio.empty()) {
    uint64_t i = uint64_t{layer} * kv_heads + head;
    KVTIER_CHECK(i < head_ratio.size(), "budget_spec: head_ratio does not cover this head");
    r = head_ratio[i];
  } else if (!layer_ratio.empty()) {
    KVTIER_CHECK(layer < layer_ratio.size(), "budget_spec: layer_ratio does not cover this layer");
    r = layer_ratio[layer];
  }
  auto kept = static_cast<uint64_t>(std::ceil(std::clamp(r, 0.0, 1.0) * static_cast<double>(n) - 1e-9));
  kept = std::max(kept, min_tokens);
  if (max_tokens > 0)
    kept = std::min(kept, std::max(max_tokens, min_tokens));
  return std::min(kept, n);
}

} // namespace kvtier::compression
