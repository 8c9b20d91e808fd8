#include "real/model_shape.hpp"

#include "real/checkpoint.hpp"
#include "runtime/error.hpp"

#include <fmt/format.h>

namespace kvtier {

caf::expected<model::llama_config> llama_config_for(const config& cfg) {
  const auto& m = cfg.geometry.model;
  if (m.intermediate == 0 || m.vocab == 0)
    return make_error(errc::invalid_config,
                      fmt::format("{}: [model] \"{}\" has no MLP width or vocabulary for a real model; set [model] "
                                  "intermediate and vocab, or [compute] model_dir",
                                  cfg.source, m.name));
  model::llama_config c;
  c.vocab = m.vocab;
  c.hidden = m.hidden;
  c.intermediate = m.intermediate;
  c.layers = m.layers;
  c.q_heads = m.query_heads;
  c.kv_heads = m.kv_heads;
  c.head_dim = m.head_dim;
  c.rope_theta = 500000;
  c.scaling = {true, 8.0, 1.0, 4.0, m.name == "tiny-test" ? 64.0 : 8192.0};
  if (auto problem = c.problem(); !problem.empty())
    return make_error(errc::invalid_config, fmt::format("{}: [model] \"{}\": {}", cfg.source, m.name, problem));
  if (c.hidden != c.q_heads * c.head_dim)
    return make_error(
        errc::invalid_config,
        fmt::format("{}: [model] \"{}\": a Llama model needs hidden == query_heads x head_dim ({} != {} x {})",
                    cfg.source, m.name, c.hidden, c.q_heads, c.head_dim));
  return c;
}

caf::expected<model::llama_weights> model_weights_for(const config& cfg) {
  if (!cfg.compute.model_dir.empty()) {
    auto weights = load_checkpoint(cfg.compute.model_dir);
    if (!weights)
      return std::move(weights.error());
    // The pools were sized from [model]: the checkpoint must have its KV shape.
    const auto& m = cfg.geometry.model;
    const auto& c = weights->config;
    if (c.layers != m.layers || c.kv_heads != m.kv_heads || c.head_dim != m.head_dim)
      return make_error(errc::invalid_config,
                        fmt::format("{}: the checkpoint in {} has {} layers, {} KV heads of {} dimensions; [model] "
                                    "\"{}\" has {}, {} of {}: describe the checkpoint's shape in [model]",
                                    cfg.source, cfg.compute.model_dir, c.layers, c.kv_heads, c.head_dim, m.name,
                                    m.layers, m.kv_heads, m.head_dim));
    return weights;
  }
  auto shape = llama_config_for(cfg);
  if (!shape)
    return std::move(shape.error());
  return model::seeded_weights(*shape, cfg.compute.weights_seed);
}

} // namespace kvtier
