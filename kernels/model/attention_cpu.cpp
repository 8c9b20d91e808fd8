#include "kernels/model/attention_cpu.hpp"

#include "kernels/quant/fp8_e4m3.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvtier::model {
namespace {

// Eight partial sums in a fixed order (one vector register; the same bits every run).
float dot_lanes(const float* a, const float* b, uint32_t n) {
  using f4 = float __attribute__((vector_size(16)));
  f4 lo = {}, hi = {};
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    f4 a0, a1, b0, b1;
    std::memcpy(&a0, a + i, sizeof a0);
    std::memcpy(&a1, a + i + 4, sizeof a1);
    std::memcpy(&b0, b + i, sizeof b0);
    std::memcpy(&b1, b + i + 4, sizeof b1);
    lo += a0 * b0;
    hi += a1 * b1;
  }
  float s = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
  for (; i < n; ++i)
    s += a[i] * b[i];
  return s;
}

} // namespace

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
  // The scratch holds the scores, then one KV head's keys and values as
  // floats: each head's rows are converted once for its whole query group,
  // and a decode step allocates nothing.
  if (scores.size() < n * (1 + 2 * d))
    scores.resize(n * (1 + 2 * d));
  float* keys = scores.data() + n;
  float* values = keys + n * d;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (uint32_t kvh = 0; kvh < pool.kv_heads; ++kvh) {
    for (uint64_t p = 0; p < n; ++p) {
      const uint32_t slot = block_table[p / B], t = static_cast<uint32_t>(p % B);
      load_kv_row(pool, false, slot, layer, kvh, t, &keys[p * d]);
      load_kv_row(pool, true, slot, layer, kvh, t, &values[p * d]);
    }
    for (uint32_t h = kvh * group; h < (kvh + 1) * group; ++h) {
      const float* q = query.q + size_t{h} * d;
      float top = -INFINITY;
      for (uint64_t p = 0; p < n; ++p) {
        scores[p] = dot_lanes(q, &keys[p * d], d) * scale;
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
        const float* row = &values[p * d];
        for (uint32_t i = 0; i < d; ++i)
          o[i] += w * row[i];
        if (block_mass)
          block_mass[p / B] += w;
        if (also_mass)
          also_mass[p / B] += w;
      }
    }
  }
}

} // namespace kvtier::model
