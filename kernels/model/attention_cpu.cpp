#include "kernels/model/attention_cpu.hpp"

#include "kernels/quant/fp8_e4m3.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier::model {

void store_kv_row(const paged_kv_pool& pool, uint32_t slot, uint32_t layer, uint32_t head, uint32_t t, const float* k,
                  const float* v) {
  const uint32_t d = pool.head_dim;
  if (pool.kv_fp8) {
    // As the CUDA twin's store_kv_fp8: x * (1 / scale), nearest even, saturated to +-448.
    const float k_inverse = 1.0f / pool.k_scale, v_inverse = 1.0f / pool.v_scale;
    uint8_t* kd = pool.key_bytes(slot, layer, head, t);
    uint8_t* vd = pool.value_bytes(slot, layer, head, t);
    for (uint32_t i = 0; i < d; ++i) {
      kd[i] = quant::float_to_e4m3(k[i] * k_inverse);
      vd[i] = quant::float_to_e4m3(v[i] * v_inverse);
    }
    return;
  }
  bf16* kd = pool.key(slot, layer, head, t);
  bf16* vd = pool.value(slot, layer, head, t);
  for (uint32_t i = 0; i < d; ++i) {
    kd[i] = float_to_bf16(k[i]);
    vd[i] = float_to_bf16(v[i]);
  }
}

void load_kv_row(const paged_kv_pool& pool, bool value, uint32_t slot, uint32_t layer, uint32_t head, uint32_t t,
                 float* row) {
  const uint32_t d = pool.head_dim;
  if (pool.kv_fp8) {
    const uint8_t* e = value ? pool.value_bytes(slot, layer, head, t) : pool.key_bytes(slot, layer, head, t);
    const float scale = value ? pool.v_scale : pool.k_scale;
    for (uint32_t i = 0; i < d; ++i)
      row[i] = scale * quant::e4m3_to_float(e[i]);
    return;
  }
  const bf16* e = value ? pool.value(slot, layer, head, t) : pool.key(slot, layer, head, t);
  for (uint32_t i = 0; i < d; ++i)
    row[i] = bf16_to_float(e[i]);
}

void paged_attention(const paged_kv_pool& pool, uint32_t layer, std::span<const uint32_t> block_table,
                     const attention_query& query, float* out, std::vector<float>& scores, float* block_mass,
                     float* also_mass) {
  const uint32_t d = pool.head_dim, B = pool.block_tokens;
  const uint32_t group = query.q_heads / pool.kv_heads;
  const uint64_t n = query.position + 1;
  if (scores.size() < n)
    scores.resize(n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<float> row(d);
  for (uint32_t h = 0; h < query.q_heads; ++h) {
    const uint32_t kvh = h / group;
    const float* q = query.q + size_t{h} * d;
    float top = -INFINITY;
    for (uint64_t p = 0; p < n; ++p) {
      load_kv_row(pool, false, block_table[p / B], layer, kvh, static_cast<uint32_t>(p % B), row.data());
      float s = 0;
      for (uint32_t i = 0; i < d; ++i)
        s += q[i] * row[i];
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
      load_kv_row(pool, true, block_table[p / B], layer, kvh, static_cast<uint32_t>(p % B), row.data());
      for (uint32_t i = 0; i < d; ++i)
        o[i] += w * row[i];
      if (block_mass)
        block_mass[p / B] += w;
      if (also_mass)
        also_mass[p / B] += w;
    }
  }
}

} // namespace kvtier::model
