#pragma once
// The eviction policy interface, in the spirit of NVIDIA's kvpress: a policy
// scores every cached token of one (layer, kv head); keep_top keeps the
// protected tokens (attention sinks and the recent window) and then the
// highest scores until the budget is spent.
//
// Invariants of keep_top's result:
//  (1) ascending token indices, no duplicates, size == min(budget, tokens)
//      (a budget below the protected count keeps the protected tokens only,
//      most recent first, then sinks);
//  (2) ties in score go to the later token (recency is the safer bet);
//  (3) deterministic: the same scores give the same set.

#include "compression/attention.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvtier::compression {

struct protection {
  uint32_t sinks = 0;  // the first tokens, always kept
  uint32_t recent = 0; // the last tokens, always kept
};

class policy {
public:
  virtual ~policy() = default;
  virtual std::string name() const = 0;
  /// One score per cached token (observed.keys); higher = keep.
  virtual std::vector<float> score(const observed_attention& observed) const = 0;
  /// Tokens kept whatever their score.
  virtual protection protect() const { return {}; }
};

/// REQUIRES: scores.size() is the number of cached tokens.
std::vector<uint32_t> keep_top(std::span<const float> scores, uint32_t budget, protection p);

/// keep_top(p.score(observed), budget, p.protect()).
std::vector<uint32_t> select_tokens(const policy& p, const observed_attention& observed, uint32_t budget);

} // namespace kvtier::compression
