#include "kernels/model/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvtier::model {
namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

} // namespace

uint32_t sample_token(std::span<const float> logits, const sampling& how, uint64_t sequence, uint64_t position) {
  auto best = static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (how.temperature <= 0)
    return best;
  const double top = logits[best];
  std::vector<double> cumulative(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    cumulative[i] = sum += std::exp((logits[i] - top) / how.temperature);
  uint64_t r = mix(mix(how.seed + 0x9e3779b97f4a7c15ULL) ^ mix(sequence) ^ mix(position * 0x2545F4914F6CDD1DULL));
  double u = static_cast<double>(r >> 11) * 0x1.0p-53 * sum;
  auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
  return static_cast<uint32_t>(std::min<size_t>(it - cumulative.begin(), logits.size() - 1));
}

} // namespace kvtier::model
