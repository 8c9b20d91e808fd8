#include "kernels/model/attention_cpu.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier::model {

void paged_attention(const paged_kv_pool& pool, uint32_t layer, std::span<const uint32_t> block_table,
                     const attention_query& query, float* out, std::vector<float>& scores, float* block_mass,
                     float* also_mass) {
  const uint32_t d = pool.head_dim, B = pool.block_tokens;
  const uint32_t group = query.q_heads / pool.kv_heads;
  const uint64_t n = query.position + 1;
  if (scores.size() < n)
    scores.resize(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (uint32_t h = 0; h < query.q_heads; ++h) {
    const uint32_t kvh = h / group;
    const float* q = query.q + size_t{h} * d;
    float top = -INFINITY;
    for (uint64_t p = 0; p < n; ++p) {
      const bf16* k = pool.key(block_table[p / B], layer, kvh, static_cast<uint32_t>(p % B));
      float s = 0;
      for (uint32_t i = 0; i < d; ++i)
        s += q[i] * bf16_to_float(k[i]);
      scores[p] = s * scale;
      top = std::max(top, scores[p]);
    }
    float sum = 0;
    for (uint64_t p = 0; p < n; ++p) {
      scores[p] = std::exp(scores[p] - top);
      sum += scores[p];
    }
    float* o = out + size_t{h} * d;
    std::fill(o, o + d, 0.0f);
    const float inv = 1.0f / sum;
    for (uint64_t p = 0; p < n; ++p) {
      const float w = scores[p] * inv;
      const bf16* v = pool.value(block_table[p / B], layer, kvh, static_cast<uint32_t>(p % B));
      for (uint32_t i = 0; i < d; ++i)
        o[i] += w * bf16_to_float(v[i]);
      if (block_mass)
        block_mass[p / B] += w;
      if (also_mass)
        also_mass[p / B] += w;
    }
  }
}

} // namespace kvtier::model
