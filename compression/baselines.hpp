#pragma once
// The two ends every table is measured between:
//  random_eviction  seeded uniform scores, with the same protected sinks and
//                   recent window as the attention policies (so the gap a
//                   policy closes is what its scores add beyond protection).
//  oracle           knows the future: score(j) = attention mass the future
//                   queries give j over the full cache (summed over the
//                   group), no protection. Keeping the top of it maximises the
//                   softmax mass kept for those queries.

#include "compression/policy.hpp"

namespace kvtier::compression {

class random_eviction final : public policy {
public:
  random_eviction(uint64_t seed, protection protected_tokens) : seed_(seed), protect_(protected_tokens) {}
  std::string name() const override { return "random"; }
  std::vector<float> score(const observed_attention& observed) const override;
  protection protect() const override { return protect_; }

private:
  uint64_t seed_;
  protection protect_;
};

class oracle final : public policy {
public:
  /// `future` outlives this policy. REQUIRES: future.keys equals the cache's tokens.
  explicit oracle(const observed_attention& future) : future_(future) {}
  std::string name() const override { return "oracle"; }
  std::vector<float> score(const observed_attention& observed) const override;

private:
  const observed_attention& future_;
};

} // namespace kvtier::compression
