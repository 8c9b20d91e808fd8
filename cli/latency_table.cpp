#include "cli/latency_table.hpp"

#include "runtime/config_names.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

namespace kvtier::cli {

std::vector<latency_row> latency_table(const config& cfg, const std::vector<uint64_t>& contexts) {
  cost_model cost(cfg);
  uint64_t block_bytes = cfg.geometry.bytes_per_block();
  uint64_t budget = cfg.hbm_kv_bytes();
  std::vector<latency_row> rows;
  for (uint64_t context : contexts) {
    latency_row r;
    r.context_tokens = context;
    uint64_t blocks = (context + cfg.cache.block_tokens - 1) / cfg.cache.block_tokens;
    r.kv_bytes_per_request = blocks * block_bytes;
    r.requests_that_fit = r.kv_bytes_per_request ? budget / r.kv_bytes_per_request : 0;
    r.prefill_ms = cost.prefill_seconds(context, 0, cfg.scheduler.prefill_chunk) * 1e3;
    step_shape one;
    one.add(1, context);
    r.decode_ms_one = cost.step_seconds(one) * 1e3;
    if (r.requests_that_fit > 0) {
      step_shape full;
      for (uint64_t i = 0; i < r.requests_that_fit; ++i)
        full.add(1, context);
      r.decode_ms_full = cost.step_seconds(full) * 1e3;
      r.tokens_per_s_full = double(r.requests_that_fit) / (r.decode_ms_full / 1e3);
    }
    rows.push_back(r);
  }
  return rows;
}

std::string latency_text(const config& cfg, const std::vector<latency_row>& rows) {
  const auto& m = cfg.geometry.model;
  std::string out =
      fmt::format("model {} (KV {}, weights {}) on {} ({}, {} reserved; KV budget {}), prefill chunks of {} tokens; "
                  "step times: {}\n",
                  m.name, name_of(cfg.geometry.dtype), name_of(cfg.weights_dtype), cfg.hardware.name,
                  format_bytes(cfg.hardware.gpu.hbm_bytes), format_bytes(cfg.hardware.gpu.reserved_bytes),
                  format_bytes(cfg.hbm_kv_bytes()), cfg.scheduler.prefill_chunk, cost_model(cfg).compute_model());
  out += fmt::format("{:>9} {:>12} {:>6} {:>12} {:>12} {:>12} {:>12}\n", "context", "KV/request", "fit", "prefill ms",
                     "TPOT ms x1", "TPOT ms full", "tok/s full");
  for (const auto& r : rows)
    out += fmt::format("{:>9} {:>12} {:>6} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.0f}\n", format_count(r.context_tokens),
                       format_bytes(r.kv_bytes_per_request), r.requests_that_fit, r.prefill_ms, r.decode_ms_one,
                       r.decode_ms_full, r.tokens_per_s_full);
  return out;
}

nlohmann::json latency_json(const config& cfg, const std::vector<latency_row>& rows) {
  auto table = nlohmann::json::array();
  for (const auto& r : rows)
    table.push_back({{"context_tokens", r.context_tokens},
                     {"kv_bytes_per_request", r.kv_bytes_per_request},
                     {"requests_that_fit", r.requests_that_fit},
                     {"prefill_ms", r.prefill_ms},
                     {"decode_ms_one", r.decode_ms_one},
                     {"decode_ms_full", r.decode_ms_full},
                     {"tokens_per_s_full", r.tokens_per_s_full}});
  return {{"model", cfg.geometry.model.name},
          {"dtype", std::string(name_of(cfg.geometry.dtype))},
          {"weights_dtype", std::string(name_of(cfg.weights_dtype))},
          {"profile", cfg.hardware.name},
          {"compute_model", cost_model(cfg).compute_model()},
          {"gpu_hbm_bytes", cfg.hardware.gpu.hbm_bytes},
          {"kv_budget_bytes", cfg.hbm_kv_bytes()},
          {"prefill_chunk", cfg.scheduler.prefill_chunk},
          {"block_tokens", cfg.cache.block_tokens},
          {"rows", table}};
}

} // namespace kvtier::cli
