// `kvtier eval-compression CONFIG.toml [--json-out FILE]`: the compression
// quality harness on synthetic attention (a proxy; docs/compression.md).
// Registration: kvtier::cli::add_eval_compression_command(app) in cli/main.cpp.

#include "cli/commands.hpp"
#include "compression/harness.hpp"
#include "compression/precision_config.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/toml_reader.hpp"

#include <fmt/format.h>

#include <memory>

namespace kvtier::cli {

command add_eval_compression_command(CLI::App& app);

namespace {

using compression::eval_config;
using compression::synthetic_config;

// An array of strings or numbers under `key`, with located errors.
template <class T>
void read_array(toml_reader& r, const toml::table& t, std::string_view key, std::vector<T>& out) {
  r.mark_known(key);
  const toml::node* node = t.get(key);
  if (!node || !r.ok())
    return;
  const toml::array* arr = node->as_array();
  if (!arr)
    return r.fail(key,
                  std::is_same_v<T, std::string> ? "expected an array of strings" : "expected an array of numbers");
  std::vector<T> values;
  for (const auto& e : *arr) {
    if constexpr (std::is_same_v<T, std::string>) {
      auto s = e.value<std::string>();
      if (!s)
        return r.fail(key, fmt::format("expected strings only ({})", r.where(e.source())));
      values.push_back(*s);
    } else {
      auto v = e.value<double>();
      if (!v)
        return r.fail(key, fmt::format("expected numbers only ({})", r.where(e.source())));
      values.push_back(*v);
    }
  }
  out = std::move(values);
}

const std::vector<std::string_view> model_keys{"regime",
                                               "tokens",
                                               "future_queries",
                                               "head_dim",
                                               "layers",
                                               "kv_heads",
                                               "group",
                                               "sinks",
                                               "sink_logit",
                                               "importance_alpha",
                                               "importance_scale",
                                               "shared_importance",
                                               "noise_logit",
                                               "recency_logit",
                                               "recency_tau",
                                               "outlier_channels",
                                               "outlier_value",
                                               "needles",
                                               "needle_visible",
                                               "question_tokens",
                                               "needle_future_queries",
                                               "needle_margin",
                                               "needle_logit",
                                               "seed",
                                               "name"};

void read_model(toml_reader& r, synthetic_config& m) {
  r.read_choice("regime", m.regime, {"structured", "high_entropy"});
  r.read("tokens", m.tokens, 16, 65536);
  r.read("future_queries", m.future_queries, 1, 4096);
  r.read("head_dim", m.head_dim, 16, 512);
  r.read("layers", m.layers, 1, 256);
  r.read("kv_heads", m.kv_heads, 1, 256);
  r.read("group", m.group, 1, 64);
  r.read("sinks", m.sinks, 0, 1024);
  r.read("sink_logit", m.sink_logit, 0.0, 100.0);
  r.read("importance_alpha", m.importance_alpha, 0.1, 100.0);
  r.read("importance_scale", m.importance_scale, 0.0, 100.0);
  r.read("shared_importance", m.shared_importance, 0.0, 1.0);
  r.read("noise_logit", m.noise_logit, 0.0, 100.0);
  r.read("recency_logit", m.recency_logit, 0.0, 100.0);
  r.read("recency_tau", m.recency_tau, 0.1, 1e6);
  r.read("outlier_channels", m.outlier_channels, 0, 64);
  r.read("outlier_value", m.outlier_value, 0.0, 1000.0);
  r.read("needles", m.needles, 0, 64);
  r.read("needle_visible", m.needle_visible);
  r.read("question_tokens", m.question_tokens, 1, 64);
  r.read("needle_future_queries", m.needle_future_queries, 1, 64);
  r.read("needle_margin", m.needle_margin, 0, 65536);
  r.read("needle_logit", m.needle_logit, 0.0, 100.0);
  r.read("seed", m.seed, 0, UINT64_MAX);
}

caf::expected<eval_config> load_eval_config(const std::string& path) {
  auto table = parse_toml_file(path);
  if (!table)
    return table.error();
  eval_config config;
  synthetic_config base;
  toml_reader top(*table, path, "");
  const toml::table* eval = top.sub_table("eval");
  const toml::table* model = top.sub_table("model");
  const toml::table* quant = top.sub_table("quant");
  top.mark_known("scenario");
  if (auto err = top.finish({"eval", "model", "quant", "scenario"}))
    return err;
  if (eval) {
    toml_reader r(*eval, path, "eval");
    read_array(r, *eval, "policies", config.policies);
    read_array(r, *eval, "budgets", config.budgets);
    r.read("seeds", config.seeds, 1, 100);
    r.read("topk", config.topk, 1, 4096);
    r.read("sinks", config.settings.sinks, 0, 4096);
    r.read("recent", config.settings.recent, 0, 65536);
    r.read("window", config.settings.window, 1, 65536);
    r.read("pool", config.settings.pool, 1, 255);
    r.read("seed", config.settings.seed, 0, UINT64_MAX);
    for (const auto& p : config.policies) {
      const auto& names = compression::policy_names();
      if (std::find(names.begin(), names.end(), p) == names.end()) {
        std::string list;
        for (auto n : names)
          list += (list.empty() ? "" : ", ") + std::string(n);
        r.fail("policies", fmt::format("unknown policy \"{}\"; expected one of {}", p, list));
      }
    }
    for (double b : config.budgets)
      if (!(b > 0.0 && b <= 1.0))
        r.fail("budgets", fmt::format("each budget is a fraction in (0, 1], got {}", b));
    if (auto err = r.finish({"policies", "budgets", "seeds", "topk", "sinks", "recent", "window", "pool", "seed"}))
      return err;
  }
  if (model) {
    toml_reader r(*model, path, "model");
    read_model(r, base);
    if (auto err = r.finish(model_keys))
      return err;
  }
  if (quant) {
    toml_reader r(*quant, path, "quant");
    read_array(r, *quant, "formats", config.quant_formats);
    r.read("residual_tokens", config.residual_tokens, 0, 65536);
    r.read("outlier_channels", config.outlier_channels, 0, 64);
    for (const auto& f : config.quant_formats)
      if (!compression::is_quant_format(f))
        r.fail("formats",
               fmt::format("unknown format \"{}\"; expected fp16, fp8_token, fp8_tensor, int8_token, "
                           "int4_token, int4_row or int4_kivi, each optionally with the suffix _outliers",
                           f));
    const toml::table* plan = r.sub_table("plan");
    if (auto err = r.finish({"formats", "residual_tokens", "outlier_channels", "plan"}))
      return err;
    if (plan) {
      auto p = compression::read_precision_plan(*plan, path, "quant.plan");
      if (!p)
        return p.error();
      config.plan = *p;
    }
  }
  if (const toml::node* sc = table->get("scenario")) {
    const toml::array* arr = sc->as_array();
    if (!arr || !arr->is_array_of_tables())
      return make_error(errc::invalid_config,
                        fmt::format("{}: scenario: expected [[scenario]] tables", top.where(sc->source())));
    for (const auto& e : *arr) {
      const toml::table& t = *e.as_table();
      compression::scenario s{"", base};
      toml_reader r(t, path, "scenario");
      r.read("name", s.name);
      read_model(r, s.model);
      if (r.ok() && s.name.empty())
        r.fail("name", "every [[scenario]] needs a name");
      if (auto err = r.finish(model_keys))
        return err;
      config.scenarios.push_back(std::move(s));
    }
  }
  if (config.scenarios.empty())
    config.scenarios = compression::default_scenarios(base);
  return config;
}

struct options {
  std::string config;
  std::string json_out;
};

int run(const options& o) {
  auto config = load_eval_config(o.config);
  if (!config) {
    fmt::print(stderr, "kvtier eval-compression: {}\n", describe(config.error()));
    return 2;
  }
  auto report = compression::run_eval(*config);
  if (!report) {
    fmt::print(stderr, "kvtier eval-compression: {}\n", describe(report.error()));
    return 2;
  }
  fmt::print("{}", compression::format_report(*report));
  if (!o.json_out.empty()) {
    if (auto err = write_text_file(o.json_out, compression::report_json(*report) + "\n")) {
      fmt::print(stderr, "kvtier eval-compression: --json-out: {}\n", describe(err));
      return 2;
    }
    fmt::print("\nJSON written to {}\n", o.json_out);
  }
  return 0;
}

} // namespace

command add_eval_compression_command(CLI::App& app) {
  auto o = std::make_shared<options>();
  auto* sub = app.add_subcommand(
      "eval-compression",
      "KV compression quality on seeded synthetic attention (a proxy): eviction policies, quantizers");
  sub->add_option("config", o->config, "evaluation config (TOML), e.g. configs/eval-compression.toml")->required();
  sub->add_option("--json-out", o->json_out, "also write the results as JSON to this file");
  return {sub, [o] { return run(*o); }};
}

} // namespace kvtier::cli
