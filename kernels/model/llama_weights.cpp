#include "kernels/model/llama_weights.hpp"

#include <cmath>

namespace kvtier::model {
namespace {

uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// `count` values uniform in center +- spread; each tensor has its own stream.
std::vector<bf16> uniform(size_t count, double center, double spread, uint64_t seed, uint64_t tensor) {
  std::vector<bf16> out(count);
  uint64_t state = seed * 0x2545F4914F6CDD1DULL + tensor;
  for (auto& v : out) {
    double u = static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53; // [0, 1)
    v = float_to_bf16(static_cast<float>(center + spread * (2 * u - 1)));
  }
  return out;
}

std::string sized(const std::vector<bf16>& t, size_t want, const std::string& name) {
  return t.size() == want ? std::string{}
                          : name + " has " + std::to_string(t.size()) + " elements, expected " + std::to_string(want);
}

} // namespace

std::string llama_weights::shape_problem() const {
  const auto& c = config;
  const size_t h = c.hidden, q = size_t{c.q_heads} * c.head_dim, kv = size_t{c.kv_heads} * c.head_dim,
               f = c.intermediate, v = c.vocab;
  if (layers.size() != c.layers)
    return "the model has " + std::to_string(layers.size()) + " layers, expected " + std::to_string(c.layers);
  std::string p;
  auto check = [&](const std::vector<bf16>& t, size_t want, const std::string& name) {
    if (p.empty())
      p = sized(t, want, name);
  };
  check(embed, v * h, "embed_tokens");
  check(final_norm, h, "norm");
  if (!c.tied_embeddings)
    check(lm_head, v * h, "lm_head");
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& w = layers[l];
    auto n = [&](const char* what) { return "layers." + std::to_string(l) + "." + what; };
    check(w.attn_norm, h, n("input_layernorm"));
    check(w.wq, q * h, n("q_proj"));
    check(w.wk, kv * h, n("k_proj"));
    check(w.wv, kv * h, n("v_proj"));
    check(w.wo, h * q, n("o_proj"));
    check(w.mlp_norm, h, n("post_attention_layernorm"));
    check(w.w_gate, f * h, n("gate_proj"));
    check(w.w_up, f * h, n("up_proj"));
    check(w.w_down, h * f, n("down_proj"));
  }
  return p;
}

llama_weights seeded_weights(const llama_config& c, uint64_t seed) {
  llama_weights w;
  w.config = c;
  const size_t h = c.hidden, q = size_t{c.q_heads} * c.head_dim, kv = size_t{c.kv_heads} * c.head_dim,
               f = c.intermediate, v = c.vocab;
  uint64_t tensor = 0;
  auto proj = [&](size_t out, size_t in) { return uniform(out * in, 0, 1 / std::sqrt(double(in)), seed, ++tensor); };
  auto norm = [&] { return uniform(h, 1, 0.1, seed, ++tensor); };
  w.embed = uniform(v * h, 0, 1, seed, ++tensor);
  w.layers.resize(c.layers);
  for (auto& l : w.layers) {
    l.attn_norm = norm();
    l.wq = proj(q, h);
    l.wk = proj(kv, h);
    l.wv = proj(kv, h);
    l.wo = proj(h, q);
    l.mlp_norm = norm();
    l.w_gate = proj(f, h);
    l.w_up = proj(f, h);
    l.w_down = proj(h, f);
  }
  w.final_norm = norm();
  if (!c.tied_embeddings)
    w.lm_head = proj(v, h);
  return w;
}

} // namespace kvtier::model
