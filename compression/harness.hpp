#pragma once
// The compression quality harness: runs eviction policies and quantizers on
// synthetic attention (synthetic_attention.hpp; a SYNTHETIC PROXY, not a
// trained model) and measures what the compressed cache does to the future
// queries.
//
// Eviction metrics, averaged over (layer, kv head, seed) and future queries:
//   out_err  ||o - o^|| / ||o||, o = attention output over the full cache,
//            o^ = output over the kept tokens (softmax renormalised on them)
//   mass     softmax mass of the full cache that the kept tokens hold
//   topk     fraction of each future query's top-k keys that are kept
//   needle   fraction of planted needle tokens kept (scenarios with needles)
// gap(policy) = (m(policy) - m(random)) / (m(oracle) - m(random)) per metric
// and budget: the fraction of the random -> oracle gap the policy closes;
// undefined where the oracle gains less than 5% of the room random leaves
// to the full cache (nothing stands out to find).
//
// Quantizer metrics on the fp16 cache of the same heads: key and value MSE,
// logit error RMS of q . (k - k^) / sqrt(d) over the future queries, out_err
// with dequantized K and V, and stored bytes over fp16 bytes.

#include "kernels/quant/precision_plan.hpp"
#include "compression/policy_factory.hpp"
#include "compression/synthetic_attention.hpp"

#include <caf/expected.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kvtier::compression {

struct scenario {
  std::string name;
  synthetic_config model;
};

struct eval_config {
  std::vector<scenario> scenarios;
  std::vector<std::string> policies; // random, streaming_llm and oracle are always run
  std::vector<double> budgets{0.1, 0.2, 0.5};
  policy_settings settings;
  uint32_t topk = 8;
  uint32_t seeds = 1; // repetitions with seeds model.seed, model.seed + 1, ...
  // fp16, fp8_token, fp8_tensor, int8_token, int4_token, int4_kivi; a suffix
  // _outliers keeps `outlier_channels` key channels in fp16.
  std::vector<std::string> quant_formats;
  uint32_t residual_tokens = 32; // KIVI's fp16 window
  uint32_t outlier_channels = 2; // for the *_outliers formats
  // A per-layer plan, measured as the quantizer row "plan" (each head uses its
  // layer's formats; its residual window and outlier channels apply).
  std::optional<quant::precision_plan> plan;
};

/// structured, needle_visible, needle_hidden, high_entropy, local_context.
std::vector<scenario> default_scenarios(const synthetic_config& base);

struct eviction_metrics {
  double out_err = 0;
  double mass = 0;
  double topk = 0;
  double needle = -1; // -1: no needles in this scenario
};

struct eviction_row {
  std::string policy;
  double budget = 0;
  eviction_metrics m;
  // Fraction of the random -> oracle gap closed; NaN where the gap is ~0 or n/a.
  double gap_out_err = 0;
  double gap_mass = 0;
  double gap_needle = 0;
};

struct quant_row {
  std::string format;
  double key_mse = 0;
  double value_mse = 0;
  double logit_rmse = 0;
  double out_err = 0;
  double bytes_ratio = 1; // stored bytes / fp16 bytes
};

struct scenario_report {
  std::string name;
  synthetic_config model; // resolved
  std::vector<eviction_row> rows;
  std::vector<quant_row> quant;
};

struct eval_report {
  std::vector<scenario_report> scenarios;
  std::vector<double> budgets;
  uint32_t heads_per_scenario = 0;
};

/// True if `name` is a quantizer format the harness knows (see eval_config::quant_formats).
bool is_quant_format(const std::string& name);

/// Errors: errc::invalid_argument for an unknown policy or format, or a budget outside (0, 1].
caf::expected<eval_report> run_eval(const eval_config& config);

/// The plain-text tables (one per scenario) the CLI prints.
std::string format_report(const eval_report& report);
/// The same as JSON text.
std::string report_json(const eval_report& report);

} // namespace kvtier::compression
