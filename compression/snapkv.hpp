#pragma once
// SnapKV (Li et al. 2024): the last `window` prompt queries (the observation
// window, where the question usually sits) vote for the keys they attend to;
// votes are summed over the GQA group, smoothed by a max pool of width
// `pool` (so a kept token brings its neighbours, which keeps phrases whole),
// and the top scores are kept. The observation window itself is protected.
//
// score(j) = max over |i - j| <= pool/2 of sum_h sum_{q in window} p[h][q][i]

#include "compression/policy.hpp"

namespace kvtier::compression {

class snapkv final : public policy {
public:
  snapkv(uint32_t window, uint32_t pool, uint32_t sinks) : window_(window), pool_(pool), sinks_(sinks) {}
  std::string name() const override { return "snapkv"; }
  std::vector<float> score(const observed_attention& observed) const override;
  protection protect() const override { return {sinks_, window_}; }

private:
  uint32_t window_;
  uint32_t pool_;
  uint32_t sinks_;
};

} // namespace kvtier::compression
