#include "compression/sim_model.hpp"

#include "runtime/error.hpp"

#include <algorithm>

namespace kvtier::compression {

footprint compressed_footprint(uint64_t tokens, const sim_policy& policy, const kv_geometry& geometry,
                               kv_dtype offload_dtype) {
  footprint f;
  f.tokens_before = tokens;
  const auto& m = geometry.model;
  for (uint32_t layer = 0; layer < std::max(m.layers, 1u); ++layer)
    for (uint32_t head = 0; head < std::max(m.kv_heads, 1u); ++head)
      f.tokens_kept = std::max(f.tokens_kept, policy.budget.tokens(layer, head, m.kv_heads, tokens));
  f.blocks_before = geometry.blocks_for(tokens);
  f.blocks_kept = geometry.blocks_for(f.tokens_kept);
  f.blocks_freed = f.blocks_before - f.blocks_kept;
  f.hbm_bytes = f.blocks_kept * geometry.bytes_per_block();
  kv_geometry offload = geometry;
  offload.dtype = offload_dtype;
  f.offload_bytes = f.blocks_kept * offload.bytes_per_block();
  return f;
}

synthetic_config small_model() {
  synthetic_config m;
  m.tokens = 512;
  m.layers = 1;
  m.kv_heads = 2;
  m.needles = 4;
  m.needle_visible = true;
  return m;
}

caf::expected<quality_estimate> modeled_quality(const std::string& policy, double ratio,
                                                const synthetic_config& model) {
  eval_config config;
  config.scenarios = {{"modeled", model}};
  config.policies = {policy};
  config.budgets = {ratio};
  auto report = run_eval(config);
  if (!report)
    return report.error();
  for (const auto& row : report->scenarios.front().rows)
    if (row.policy == policy)
      return quality_estimate{row.m.out_err, row.m.mass, std::max(row.m.needle, 0.0)};
  return make_error(errc::invalid_argument, "modeled_quality: policy '" + policy + "' produced no result");
}

} // namespace kvtier::compression
