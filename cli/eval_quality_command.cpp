// `kvtier eval-quality --model-dir DIR --text FILE`: compression quality
// measured on a trained checkpoint through kvtier's CPU forward
// (compression/model_quality.hpp): next-byte loss and pass-key retrieval for
// every eviction policy and budget and every quantizer.
// Registration: kvtier::cli::add_eval_quality_command(app) in cli/main.cpp.

#include "cli/commands.hpp"
#include "compression/model_quality.hpp"
#include "real/checkpoint.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <iterator>
#include <memory>

namespace kvtier::cli {

command add_eval_quality_command(CLI::App& app);

namespace {

struct options {
  std::string model_dir;
  std::string text;
  std::string json_out;
  compression::quality_options q;
};

std::string format_table(const compression::quality_report& r) {
  std::string out = fmt::format("{:<16} {:>6} {:>11} {:>9} {:>8} {:>9} {:>10} {:>11}\n", "variant", "budget",
                                "nats/byte", "vs full", "+-", "passkey", "mass kept", "gap closed");
  const double full = r.rows.front().nats_per_byte;
  const bool loss = r.options.windows > 0; // pass keys alone measure no loss
  for (const auto& row : r.rows) {
    const double closed = loss ? r.gap_closed(row.name, row.budget) : NAN;
    if (!loss) {
      out += fmt::format("{:<16} {:>6.2f} {:>11} {:>9} {:>8} {:>9.3f} {:>10} {:>11}\n", row.name, row.budget, "-", "-",
                         "-", row.passkey_accuracy, "-", "-");
      continue;
    }
    out += fmt::format("{:<16} {:>6.2f} {:>11.4f} {:>+8.2f}% {:>7.2f}% {:>9.3f} {:>10.3f} {:>11}\n", row.name,
                       row.budget, row.nats_per_byte, 100.0 * (row.nats_per_byte / full - 1),
                       100.0 * row.vs_full_stderr / full, row.passkey_accuracy, row.mass_kept,
                       std::isnan(closed) ? std::string("-")
                                          : fmt::format("{:.2f}+-{:.2f}", closed, row.gap_closed_stderr));
  }
  return out;
}

nlohmann::json to_json(const compression::quality_report& r, const std::string& model_dir, const std::string& text) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    const double closed = r.gap_closed(row.name, row.budget);
    rows.push_back({{"variant", row.name},
                    {"budget", row.budget},
                    {"nats_per_byte", row.nats_per_byte},
                    {"vs_full_stderr", row.vs_full_stderr},
                    {"passkey_accuracy", row.passkey_accuracy},
                    {"passkey_nats", row.passkey_nats},
                    {"mass_kept", row.mass_kept},
                    {"kept_blocks", row.kept_blocks},
                    {"gap_closed", std::isnan(closed) ? nlohmann::json() : nlohmann::json(closed)},
                    {"gap_closed_stderr",
                     std::isnan(row.gap_closed_stderr) ? nlohmann::json() : nlohmann::json(row.gap_closed_stderr)}});
  }
  const auto& o = r.options;
  return {{"model_dir", model_dir},
          {"text", text},
          {"context_tokens", o.context_tokens},
          {"continuation_tokens", o.continuation_tokens},
          {"windows", o.windows},
          {"passkeys", o.passkeys},
          {"block_tokens", o.block_tokens},
          {"observation", o.observation},
          {"tokens_fed", r.tokens_fed},
          {"seconds", r.seconds},
          {"rows", rows}};
}

int run(options& o) {
  auto weights = load_checkpoint(o.model_dir);
  if (!weights) {
    fmt::print(stderr, "kvtier eval-quality: --model-dir: {}\n", describe(weights.error()));
    return 2;
  }
  std::ifstream in(o.text, std::ios::binary);
  if (!in) {
    fmt::print(stderr, "kvtier eval-quality: --text: cannot open {}\n", o.text);
    return 2;
  }
  std::vector<uint8_t> text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fmt::print("model {} ({} layers x {}, {} heads / {} KV heads of {}), text {} ({} bytes)\n", o.model_dir,
             weights->config.layers, weights->config.hidden, weights->config.q_heads, weights->config.kv_heads,
             weights->config.head_dim, o.text, text.size());
  auto report = compression::measure_quality(*weights, text, o.q);
  if (!report) {
    fmt::print(stderr, "kvtier eval-quality: {}\n", describe(report.error()));
    return 2;
  }
  fmt::print("{} windows of {} + {} bytes, {} pass keys; {} positions fed in {:.1f} s\n\n", o.q.windows,
             o.q.context_tokens, o.q.continuation_tokens, o.q.passkeys, report->tokens_fed, report->seconds);
  fmt::print("{}", format_table(*report));
  if (!o.json_out.empty()) {
    if (auto err = write_text_file(o.json_out, to_json(*report, o.model_dir, o.text).dump(1) + "\n")) {
      fmt::print(stderr, "kvtier eval-quality: --json-out: {}\n", describe(err));
      return 2;
    }
    fmt::print("\nJSON written to {}\n", o.json_out);
  }
  return 0;
}

} // namespace

command add_eval_quality_command(CLI::App& app) {
  auto o = std::make_shared<options>();
  auto* sub = app.add_subcommand("eval-quality",
                                 "KV compression quality on a trained checkpoint (next-byte loss, pass keys) "
                                 "through kvtier's CPU forward: eviction policies and quantizers");
  sub->add_option("--model-dir", o->model_dir, "Hugging Face Llama checkpoint folder (byte vocabulary)")->required();
  sub->add_option("--text", o->text, "held-out text (bytes), e.g. build/quality/heldout.txt")->required();
  sub->add_option("--context", o->q.context_tokens, "context bytes per window (a multiple of 16)")
      ->capture_default_str();
  sub->add_option("--continuation", o->q.continuation_tokens, "bytes scored after the context")->capture_default_str();
  sub->add_option("--windows", o->q.windows, "text windows for the loss")->capture_default_str();
  sub->add_option("--passkeys", o->q.passkeys, "pass-key prompts")->capture_default_str();
  sub->add_option("--observation", o->q.observation,
                  "SnapKV's observation window: the last prompt queries whose attention it ranks by")
      ->capture_default_str();
  sub->add_option("--budgets", o->q.budgets, "shares of the context kept")->delimiter(',')->capture_default_str();
  sub->add_option("--policies", o->q.policies, "eviction policies")->delimiter(',')->capture_default_str();
  sub->add_option("--quantizers", o->q.quantizers, "fp8_kv or kernels/quant schemes")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--threads", o->q.threads, "worker threads (0: one per core)")->capture_default_str();
  sub->add_option("--json-out", o->json_out, "also write the results as JSON to this file");
  return {sub, [o] { return run(*o); }};
}

} // namespace kvtier::cli
