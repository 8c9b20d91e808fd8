#include "kernels/model/forward_cpu.hpp"

#include "kernels/model/attention_cpu.hpp"
#include "kernels/model/rope.hpp"
#include "runtime/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kvtier::model {

float dot(const bf16* w, const float* x, uint32_t n) {
  // Eight independent partial sums (lane j takes elements j, j + 8, ...) in
  // two 4-wide registers, added pairwise at the end: the same bits every run.
  using f4 = float __attribute__((vector_size(16)));
  using u16x4 = uint16_t __attribute__((vector_size(8)));
  using u32x4 = uint32_t __attribute__((vector_size(16)));
  f4 lo = {}, hi = {};
  uint32_t c = 0;
  const auto widen = [](const bf16* p) {
    u16x4 raw;
    std::memcpy(&raw, p, sizeof raw);
    const u32x4 bits = __builtin_convertvector(raw, u32x4) << 16; // bf16 -> float is a shift
    f4 v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  };
  for (; c + 8 <= n; c += 8) {
    f4 x0, x1;
    std::memcpy(&x0, x + c, sizeof x0);
    std::memcpy(&x1, x + c + 4, sizeof x1);
    lo += widen(w + c) * x0;
    hi += widen(w + c + 4) * x1;
  }
  float s = ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
  for (; c < n; ++c)
    s += bf16_to_float(w[c]) * x[c];
  return s;
}

void matvec(const std::vector<bf16>& m, uint32_t rows, uint32_t cols, const float* x, float* y) {
  for (uint32_t r = 0; r < rows; ++r)
    y[r] = dot(m.data() + size_t{r} * cols, x, cols);
}

void matmul(const std::vector<bf16>& m, uint32_t rows, uint32_t cols, const float* x, size_t n, float* y) {
  // Tokens in groups small enough to stay in cache while every row passes
  // over them: each weight row is read once per group, not once per token.
  constexpr size_t group = 32;
  for (size_t i0 = 0; i0 < n; i0 += group) {
    const size_t i1 = std::min(n, i0 + group);
    for (uint32_t r = 0; r < rows; ++r) {
      const bf16* row = m.data() + size_t{r} * cols;
      for (size_t i = i0; i < i1; ++i)
        y[i * rows + r] = dot(row, x + i * cols, cols);
    }
  }
}

void rms_norm(const float* x, const std::vector<bf16>& weight, uint32_t n, double eps, float* out) {
  float ss = 0;
  for (uint32_t i = 0; i < n; ++i)
    ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + static_cast<float>(eps));
  for (uint32_t i = 0; i < n; ++i)
    out[i] = x[i] * inv * bf16_to_float(weight[i]);
}

cpu_forward::cpu_forward(const llama_weights& weights, const paged_kv_pool& pool)
    : w_(weights), pool_(pool), inv_freq_(rope_inv_freq(weights.config)) {
  KVTIER_CHECK(weights.shape_problem().empty(), "cpu_forward: weights do not match their config");
  KVTIER_CHECK(!pool.kv_fp8 ||
                   (pool.k_scale > 0 && pool.v_scale > 0 && std::isfinite(pool.k_scale) && std::isfinite(pool.v_scale)),
               "cpu_forward: float8 KV needs finite positive k_scale and v_scale");
  KVTIER_CHECK(pool.consistent() && pool.kv_heads == weights.config.kv_heads &&
                   pool.head_dim == weights.config.head_dim && pool.layout.layers == weights.config.layers,
               "cpu_forward: the pool's shape is not the model's");
}

void cpu_forward::apply(const kv_copy& copy) const {
  // Byte offsets are the same for both element types: one head's rows of a
  // slice start at (head * block_tokens) elements, V at kv_heads * block_tokens * head_dim.
  const size_t e = pool_.element_bytes(), head = size_t{pool_.block_tokens} * pool_.head_dim * e;
  const size_t rows = size_t{pool_.head_dim} * e * copy.tokens, v_at = pool_.kv_heads * head;
  for (uint32_t l = 0; l < pool_.layout.layers; ++l)
    for (uint32_t h = 0; h < pool_.kv_heads; ++h) {
      std::byte* to = pool_.slice(copy.to_slot, l) + h * head;
      const std::byte* from = pool_.slice(copy.from_slot, l) + h * head;
      std::memcpy(to, from, rows);
      std::memcpy(to + v_at, from + v_at, rows);
    }
}

sequence_result cpu_forward::run(const sequence_input& in) {
  const auto& c = w_.config;
  const uint32_t H = c.hidden, D = c.head_dim, Q = c.q_heads * D, KV = c.kv_heads * D, F = c.intermediate;
  const uint32_t B = pool_.block_tokens;
  const size_t n = in.tokens.size();
  KVTIER_CHECK(n > 0, "cpu_forward::run: no tokens");
  KVTIER_CHECK(in.dropped_tokens <= in.first_position && in.dropped_tokens % B == 0,
               "cpu_forward::run: dropped tokens must be whole blocks before the step");
  // Table entries: position p is entry p - dropped.
  const uint64_t dropped = in.dropped_tokens, first_entry = in.first_position - dropped;
  KVTIER_CHECK(uint64_t{in.block_table.size()} * B >= first_entry + n,
               "cpu_forward::run: the block table does not cover the step");
  for (uint64_t b = (in.context_tokens - dropped) / B; b < in.block_table.size() && b * B < first_entry + n; ++b)
    KVTIER_CHECK(!paged_kv_pool::streamed(in.block_table[b]),
                 "cpu_forward::run: a block the step writes is streamed from DRAM; it must be in HBM");
  for (uint32_t entry : in.block_table)
    KVTIER_CHECK(!paged_kv_pool::streamed(entry) || pool_.dram_consistent(),
                 "cpu_forward::run: a streamed block but the pool view has no DRAM pool");
  std::vector<float> x(n * H), q(n * Q), normed(n * H), k(n * KV), v(n * KV), attn(n * Q), proj(n * H), gate(n * F),
      up(n * F);
  for (size_t i = 0; i < n; ++i) {
    KVTIER_CHECK(in.tokens[i] < c.vocab, "cpu_forward::run: token id outside the vocabulary");
    const bf16* e = w_.embed.data() + size_t{in.tokens[i]} * H;
    for (uint32_t j = 0; j < H; ++j)
      x[i * H + j] = bf16_to_float(e[j]);
  }
  sequence_result result;
  const size_t mass_from = n - std::clamp<size_t>(in.mass_queries, 1, n);
  if (in.want_block_mass) {
    result.block_mass.assign(in.block_table.size(), 0.0f);
    result.last_block_mass.assign(in.block_table.size(), 0.0f);
  }
  // The positions whose K/V this step writes: those past the cached context.
  const size_t fresh_from = static_cast<size_t>(
      std::min<uint64_t>(n, in.context_tokens > in.first_position ? in.context_tokens - in.first_position : 0));
  const size_t fresh = n - fresh_from;
  // Each position's arithmetic is the same as alone (one dot() per output
  // element), so chunking never changes a bit; the products run as matrix
  // products over the step's positions to read each weight once per group.
  for (uint32_t l = 0; l < c.layers; ++l) {
    const auto& lw = w_.layers[l];
    // Every new position's K/V first: later positions of the chunk attend to earlier ones.
    for (size_t i = 0; i < n; ++i)
      rms_norm(&x[i * H], lw.attn_norm, H, c.rms_eps, &normed[i * H]);
    matmul(lw.wq, Q, H, normed.data(), n, q.data());
    matmul(lw.wk, KV, H, &normed[fresh_from * H], fresh, k.data());
    matmul(lw.wv, KV, H, &normed[fresh_from * H], fresh, v.data());
    for (size_t i = 0; i < n; ++i) {
      const uint64_t pos = in.first_position + i;
      apply_rope(&q[i * Q], c.q_heads, D, pos, inv_freq_);
      if (i < fresh_from)
        continue; // cached already
      float* ki = &k[(i - fresh_from) * KV];
      apply_rope(ki, c.kv_heads, D, pos, inv_freq_);
      const uint64_t entry = pos - dropped;
      const uint32_t slot = in.block_table[entry / B], t = static_cast<uint32_t>(entry % B);
      for (uint32_t h = 0; h < c.kv_heads; ++h)
        store_kv_row(pool_, slot, l, h, t, &ki[h * D], &v[(i - fresh_from) * KV + h * D]);
    }
    for (size_t i = 0; i < n; ++i) {
      const bool last = i + 1 == n;
      const bool observed = in.want_block_mass && i >= mass_from;
      paged_attention(pool_, l, in.block_table, {&q[i * Q], c.q_heads, first_entry + i}, &attn[i * Q], scores_,
                      observed ? result.block_mass.data() : nullptr,
                      observed && last ? result.last_block_mass.data() : nullptr);
    }
    matmul(lw.wo, H, Q, attn.data(), n, proj.data());
    for (size_t i = 0; i < n * H; ++i)
      x[i] += proj[i];
    for (size_t i = 0; i < n; ++i)
      rms_norm(&x[i * H], lw.mlp_norm, H, c.rms_eps, &normed[i * H]);
    matmul(lw.w_gate, F, H, normed.data(), n, gate.data());
    matmul(lw.w_up, F, H, normed.data(), n, up.data());
    for (size_t i = 0; i < n * F; ++i)
      gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i]; // SiLU(gate) * up
    matmul(lw.w_down, H, F, gate.data(), n, proj.data());
    for (size_t i = 0; i < n * H; ++i)
      x[i] += proj[i];
  }
  std::vector<float> last_normed(H);
  rms_norm(&x[(n - 1) * H], w_.final_norm, H, c.rms_eps, last_normed.data());
  result.logits.resize(c.vocab);
  matvec(w_.output_matrix(), c.vocab, H, last_normed.data(), result.logits.data());
  return result;
}

} // namespace kvtier::model
