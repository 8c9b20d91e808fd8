#include "compression/synthetic_attention.hpp"

#include "runtime/check.hpp"
#include "runtime/error.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvtier::compression {
namespace {

float dot(const float* a, const float* b, uint32_t d) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  uint32_t i = 0;
  for (; i + 4 <= d; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < d; ++i)
    s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Softmax of `row[0..n)` in place (entries past n are left 0).
void softmax(float* row, uint32_t n) {
  float m = *std::max_element(row, row + n);
  double sum = 0;
  for (uint32_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - m);
    sum += row[j];
  }
  auto inv = static_cast<float>(1.0 / sum);
  for (uint32_t j = 0; j < n; ++j)
    row[j] *= inv;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

} // namespace

synthetic_config synthetic_config::resolved() const {
  synthetic_config c = *this;
  if (c.regime == "high_entropy") {
    c.sinks = 0;
    c.sink_logit = 0;
    c.importance_scale = 0;
    c.recency_logit = 0;
    c.noise_logit = 0.3;
  }
  return c;
}

caf::error validate(const synthetic_config& config) {
  const synthetic_config c = config.resolved();
  if (c.regime != "structured" && c.regime != "high_entropy")
    return make_error(errc::invalid_argument, "synthetic attention: regime must be structured or high_entropy");
  if (c.tokens == 0 || c.group == 0 || c.future_queries == 0 || c.layers == 0 || c.kv_heads == 0)
    return make_error(errc::invalid_argument,
                      "synthetic attention: tokens, group, future_queries, layers and kv_heads must be positive");
  if (2u + c.group + c.needles + c.outlier_channels >= c.head_dim)
    return make_error(errc::invalid_argument,
                      "synthetic attention: head_dim " + std::to_string(c.head_dim) +
                          " leaves no content channels after 2 + group " + std::to_string(c.group) + " + needles " +
                          std::to_string(c.needles) + " + outlier channels " + std::to_string(c.outlier_channels));
  if (c.needles > 0 && c.tokens <= c.sinks + c.needle_margin + c.needles)
    return make_error(
        errc::invalid_argument,
        "synthetic attention: too few tokens for the needles (tokens must exceed sinks + needle_margin + needles)");
  if (c.needle_visible && uint64_t{c.needles} * c.question_tokens >= c.tokens)
    return make_error(errc::invalid_argument,
                      "synthetic attention: the questions (needles x question_tokens) do not fit in the prompt");
  return {};
}

float synthetic_head::logit(const float* q, uint32_t pos, uint32_t key) const {
  float l = dot(q, keys.data() + uint64_t{key} * head_dim, head_dim) / std::sqrt(static_cast<float>(head_dim));
  if (recency_logit != 0 && pos >= key)
    l += static_cast<float>(recency_logit * std::exp(-static_cast<double>(pos - key) / recency_tau));
  return l;
}

synthetic_head generate_head(const synthetic_config& config, uint32_t layer, uint32_t kv_head) {
  const synthetic_config c = config.resolved();
  const uint32_t d = c.head_dim, n = c.tokens, g = c.group;
  const uint32_t reserved = 2 + g + c.needles;
  KVTIER_CHECK(reserved + c.outlier_channels < d, "synthetic attention: head_dim too small for the structure channels");
  KVTIER_CHECK(c.needles == 0 || n > c.sinks + c.needle_margin + c.needles,
               "synthetic attention: too few tokens for needles");
  KVTIER_CHECK(!c.needle_visible || c.needles * c.question_tokens < n,
               "synthetic attention: questions longer than the prompt");
  std::mt19937_64 rng(mix(mix(c.seed, layer), kv_head));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const uint32_t content = d - reserved;
  const float s = static_cast<float>(std::pow(c.noise_logit * c.noise_logit * d / content, 0.25));
  const float root_d = std::sqrt(static_cast<float>(d));

  synthetic_head h;
  h.tokens = n;
  h.head_dim = d;
  h.group = g;
  h.recency_logit = c.recency_logit;
  h.recency_tau = c.recency_tau;
  h.keys.assign(uint64_t{n} * d, 0.0f);
  h.values.resize(uint64_t{n} * d);

  // Needle positions: distinct, in [sinks, n - needle_margin).
  while (h.needle_pos.size() < c.needles) {
    auto p = static_cast<uint32_t>(c.sinks + uniform(rng) * (n - c.needle_margin - c.sinks));
    if (std::find(h.needle_pos.begin(), h.needle_pos.end(), p) == h.needle_pos.end())
      h.needle_pos.push_back(p);
  }
  std::vector<uint32_t> needle_order = h.needle_pos; // needle m sits at needle_order[m], on channel 2 + g + m
  std::sort(h.needle_pos.begin(), h.needle_pos.end());

  auto pareto_log = [&] { return -std::log(1.0 - uniform(rng)) / c.importance_alpha; }; // ln a, a ~ Pareto(alpha)
  for (uint32_t j = 0; j < n; ++j) {
    float* k = h.keys.data() + uint64_t{j} * d;
    if (j < c.sinks)
      k[0] = static_cast<float>(c.sink_logit) * root_d;
    k[1] = static_cast<float>(root_d * c.importance_scale * c.shared_importance * pareto_log());
    for (uint32_t hh = 0; hh < g; ++hh)
      k[2 + hh] = static_cast<float>(root_d * c.importance_scale * (1.0 - c.shared_importance) * pareto_log());
    for (uint32_t i = reserved; i < d; ++i)
      k[i] = s * normal(rng);
    for (uint32_t o = 0; o < c.outlier_channels; ++o)
      k[d - 1 - o] += static_cast<float>(c.outlier_value);
    for (uint32_t i = 0; i < d; ++i)
      h.values[uint64_t{j} * d + i] = normal(rng);
  }
  for (uint32_t m = 0; m < c.needles; ++m)
    h.keys[uint64_t{needle_order[m]} * d + 2 + g + m] = static_cast<float>(c.needle_logit) * root_d;

  // A query of head hh; `needle` >= 0 makes it a retrieval query for that needle.
  auto make_query = [&](float* q, uint32_t hh, int needle) {
    q[0] = 1.0f;
    q[1] = 1.0f;
    q[2 + hh] = 1.0f;
    if (needle >= 0)
      q[2 + g + static_cast<uint32_t>(needle)] = 1.0f;
    for (uint32_t i = reserved; i < d; ++i)
      q[i] = s * normal(rng);
  };
  h.prompt_queries.assign(uint64_t{g} * n * d, 0.0f);
  const uint32_t questions = c.needle_visible ? c.needles * c.question_tokens : 0;
  for (uint32_t i = 0; i < n; ++i) {
    int needle = -1;
    if (i >= n - questions)
      needle = static_cast<int>((i - (n - questions)) / c.question_tokens);
    for (uint32_t hh = 0; hh < g; ++hh)
      make_query(h.prompt_queries.data() + (uint64_t{hh} * n + i) * d, hh, needle);
  }
  const uint32_t future = c.future_queries + c.needles * c.needle_future_queries;
  h.future_queries.assign(uint64_t{g} * future * d, 0.0f);
  for (uint32_t f = 0; f < future; ++f) {
    h.future_pos.push_back(n + f);
    int needle = -1;
    if (f >= c.future_queries) {
      needle = static_cast<int>((f - c.future_queries) / c.needle_future_queries);
      h.retrieval.push_back(f);
    }
    for (uint32_t hh = 0; hh < g; ++hh)
      make_query(h.future_queries.data() + (uint64_t{hh} * future + f) * d, hh, needle);
  }
  return h;
}

namespace {

observed_attention attend(const synthetic_head& h, const std::vector<float>& queries,
                          const std::vector<uint32_t>& positions, const std::vector<uint32_t>* kept) {
  observed_attention a;
  a.keys = h.tokens;
  a.group = h.group;
  a.query_pos = positions;
  const auto nq = static_cast<uint32_t>(positions.size());
  a.probs.assign(uint64_t{h.group} * nq * h.tokens, 0.0f);
  std::vector<float> scratch;
  for (uint32_t hh = 0; hh < h.group; ++hh)
    for (uint32_t qi = 0; qi < nq; ++qi) {
      const float* q = queries.data() + (uint64_t{hh} * nq + qi) * h.head_dim;
      float* row = a.probs.data() + (uint64_t{hh} * nq + qi) * h.tokens;
      uint32_t seen = a.visible(positions[qi]);
      if (!kept) {
        for (uint32_t j = 0; j < seen; ++j)
          row[j] = h.logit(q, positions[qi], j);
        softmax(row, seen);
        continue;
      }
      scratch.clear();
      for (uint32_t j : *kept)
        if (j < seen)
          scratch.push_back(h.logit(q, positions[qi], j));
      if (scratch.empty())
        continue;
      softmax(scratch.data(), static_cast<uint32_t>(scratch.size()));
      size_t k = 0;
      for (uint32_t j : *kept)
        if (j < seen)
          row[j] = scratch[k++];
    }
  return a;
}

} // namespace

observed_attention synthetic_head::prompt_attention() const {
  std::vector<uint32_t> pos(tokens);
  for (uint32_t i = 0; i < tokens; ++i)
    pos[i] = i;
  return attend(*this, prompt_queries, pos, nullptr);
}

observed_attention synthetic_head::future_attention() const {
  return attend(*this, future_queries, future_pos, nullptr);
}

observed_attention synthetic_head::future_attention_kept(const std::vector<uint32_t>& kept) const {
  return attend(*this, future_queries, future_pos, &kept);
}

} // namespace kvtier::compression
