#pragma once
// H2O (Zhang et al. 2023): keep the heavy hitters, the tokens with the most
// accumulated attention, plus a protected recent window.
//
// score(j) = sum over query heads h of the group and observed queries q of
//            p[h][q][j], then, by `accumulation`:
//   raw        the plain sum over every observed query (the paper's form).
//              A trap over a long prefill: token j is observed by the queries
//              at positions >= j only, so early tokens collect more mass
//              regardless of importance.
//   normalized the sum divided by the number of observed queries that could
//              attend to j (positions >= j): mean attention received.
//   window     the plain sum over the last `window_queries` observed queries
//              only, which every token outside the window shares equally.

#include "compression/policy.hpp"

namespace kvtier::compression {

enum class h2o_accumulation : uint8_t { raw, normalized, window };

class h2o final : public policy {
public:
  h2o(h2o_accumulation accumulation, protection protected_tokens, uint32_t window_queries = 32)
      : accumulation_(accumulation), protect_(protected_tokens), window_queries_(window_queries) {}
  std::string name() const override;
  std::vector<float> score(const observed_attention& observed) const override;
  protection protect() const override { return protect_; }

private:
  h2o_accumulation accumulation_;
  protection protect_;
  uint32_t window_queries_;
};

} // namespace kvtier::compression
