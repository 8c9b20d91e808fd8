#include "kernels/model/rope.hpp"

#include <cmath>
#include <numbers>

namespace kvtier::model {

std::vector<double> rope_inv_freq(const llama_config& cfg) {
  const uint32_t half = cfg.head_dim / 2;
  std::vector<double> inv(half);
  for (uint32_t j = 0; j < half; ++j)
    inv[j] = std::pow(cfg.rope_theta, -2.0 * j / cfg.head_dim);
  if (!cfg.scaling.enabled)
    return inv;
  const auto& s = cfg.scaling;
  const double low_freq_wavelen = s.original_max_positions / s.low_freq_factor;
  const double high_freq_wavelen = s.original_max_positions / s.high_freq_factor;
  for (auto& f : inv) {
    double wavelen = 2 * std::numbers::pi / f;
    if (wavelen < high_freq_wavelen)
      continue; // short wavelengths: unchanged
    if (wavelen > low_freq_wavelen) {
      f /= s.factor; // long wavelengths: stretched
      continue;
    }
    double smooth = (s.original_max_positions / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = (1 - smooth) * f / s.factor + smooth * f;
  }
  return inv;
}

void apply_rope(float* vectors, uint32_t heads, uint32_t head_dim, uint64_t position,
                const std::vector<double>& inv_freq) {
  const uint32_t half = head_dim / 2;
  for (uint32_t j = 0; j < half; ++j) {
    double angle = static_cast<double>(position) * inv_freq[j];
    auto c = static_cast<float>(std::cos(angle));
    auto s = static_cast<float>(std::sin(angle));
    for (uint32_t h = 0; h < heads; ++h) {
      float* v = vectors + size_t{h} * head_dim;
      float a = v[j], b = v[j + half];
      v[j] = a * c - b * s;
      v[j + half] = b * c + a * s;
    }
  }
}

} // namespace kvtier::model
