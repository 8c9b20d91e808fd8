// `kvtier run`: serves a trace on the real backend (real copies, real NVMe
// I/O, and a compute port on the wall clock: the stand-in roofline or the
// Llama model of kernels/model) and reports like `kvtier sim`.

#include "real/real_system.hpp"
#include "cli/commands.hpp"
#include "cli/sim_inputs.hpp"
#include "runtime/config_names.hpp"
#include "runtime/error.hpp"
#include "runtime/units.hpp"
#include "runtime/text_file.hpp"
#include "run/report.hpp"
#include "sim/simulation.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <memory>

namespace kvtier::cli {
namespace {

int fail(const std::string& message) {
  fmt::print(stderr, "kvtier run: {}\n", message);
  return 2;
}

int run_on_hardware(const sim_cli_options& o, const std::string& model_dir) {
  if (o.device != "auto" && o.device != "cuda" && o.device != "cpu")
    return fail(fmt::format("--device {}: expected auto, cuda or cpu", o.device));
  auto compute_scale = parse_finite(o.compute_scale);
  if (!compute_scale || *compute_scale < 0 || *compute_scale > 1e6)
    return fail(fmt::format("--compute-scale {}: expected a number in 0..1000000", o.compute_scale));
  auto cfg = load(o);
  if (!cfg)
    return fail(describe(cfg.error()));
  if (cfg->backend != backend_kind::real) {
    fmt::print(stderr, "kvtier run: {} says backend = \"{}\"; running it on the real backend anyway\n", cfg->source,
               name_of(cfg->backend));
    cfg->backend = backend_kind::real;
    // Real runs refuse what only the simulator models, and cap DRAM at this machine's.
    if (auto err = validate(*cfg))
      return fail(describe(err));
  }
  if (!model_dir.empty()) {
    cfg->compute.kind = compute_kind::model;
    cfg->compute.model_dir = model_dir;
    if (auto err = validate(*cfg))
      return fail("--model-dir: " + describe(err));
  }
  if (cfg->cache.policy == eviction_policy::oracle)
    return fail(fmt::format("{}: [cache] policy = \"oracle\" knows the future and bounds what any policy can reach; "
                            "it runs with kvtier sim --cache-only",
                            cfg->source));
  auto trace = load_trace(*cfg);
  if (!trace)
    return fail(describe(trace.error()));
  if (trace->skipped_rows > 0) {
    fmt::print(stderr, "kvtier run: skipped {} bad rows of {}, e.g.:\n", trace->skipped_rows, trace->source);
    for (const auto& e : trace->skipped_examples)
      fmt::print(stderr, "  {}\n", e);
  }
  auto source = trace->source;
  std::vector<real_run_request> requests;
  for (auto& r : sim::requests_from(std::move(*trace)))
    requests.push_back({r.arrival_s, std::move(r.spec)});
  real_run_options ro;
  ro.backend.device = o.device;
  ro.backend.compute_time_scale = *compute_scale;
  ro.arrival_time_scale = 1.0; // the trace reader already applied [sim] time_scale
  ro.record_steps = !o.steps_csv.empty();
  bool tty = !o.quiet && isatty(STDERR_FILENO);
  if (tty)
    ro.progress = [](double t, uint64_t done, uint64_t total) {
      fmt::print(stderr, "\r  {}/{} requests settled after {:.0f} s", done, total, t);
    };
  auto result = run_real(*cfg, std::move(requests), ro);
  if (tty)
    fmt::print(stderr, "\n");
  if (!result)
    return fail(describe(result.error()));
  auto j = report_json(*cfg, *result, {o.config_path, source});
  j["backend"] = "real";
  j["compute"] = result->compute;
  fmt::print("{}", report_table(j));
  if (!o.json_out.empty())
    if (auto err = write_text_file(o.json_out, j.dump(2) + "\n"))
      return fail("--json-out: " + describe(err));
  // time_s is when a step was planned, step_s how long the compute port took: the gap to the next step's
  // time_s is what the actor graph spent between them.
  if (!o.steps_csv.empty())
    if (auto err = write_text_file(o.steps_csv, steps_csv(*result)))
      return fail("--steps-csv: " + describe(err));
  if (!o.tokens_out.empty()) {
    // Per request: the sampled tokens and each one's logit (runs whose compute port is a model).
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [id, text] : result->metrics.scheduler.generated)
      out[std::to_string(id)] = {{"tokens", text.tokens}, {"logits", text.logits}};
    if (auto err = write_text_file(o.tokens_out, out.dump() + "\n"))
      return fail("--tokens-out: " + describe(err));
  }
  return 0;
}

} // namespace

command add_run_command(CLI::App& app) {
  auto o = std::make_shared<sim_cli_options>();
  auto model_dir = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("run",
                                 "Serve a request trace on real hardware: real copies (CUDA or the CPU twin), "
                                 "real NVMe I/O, the model's forward ([compute] kind = \"model\") or a stand-in "
                                 "compute port on the wall clock");
  sub->add_option("config", o->config_path, "config (TOML) with backend = \"real\"")->required();
  sub->add_option("--trace", o->trace_path, "trace file (default: the bundled Mooncake conversation trace)");
  sub->add_option("--format", o->format, "trace format: auto, mooncake, azure, burstgpt, synthetic");
  sub->add_option("--json-out", o->json_out, "write the report as JSON");
  sub->add_option("--tokens-out", o->tokens_out,
                  "write what the model generated (tokens and their logits per request id) as JSON");
  sub->add_option("--max-requests", o->max_requests, "serve only the first N requests");
  sub->add_option("--steps-csv", o->steps_csv, "write a per-step time series as CSV (when planned, how long)");
  sub->add_option("--time-scale", o->time_scale, "multiply arrival times (0.01 = 100x faster)");
  sub->add_option("--device", o->device, "copy engine: auto (GPU if usable), cuda, cpu")->capture_default_str();
  sub->add_option("--compute-scale", o->compute_scale, "multiply the stand-in model's step time (0 = instant)")
      ->capture_default_str();
  sub->add_option("--model-dir", *model_dir,
                  "serve a Hugging Face Llama checkpoint from this folder ([compute] kind = \"model\")");
  sub->add_flag("--skip-bad", o->skip_bad, "skip and count bad trace rows instead of stopping");
  sub->add_flag("--quiet", o->quiet, "no progress line");
  return {sub, [o, sub, model_dir] {
            o->given = overrides_of(*o, *sub);
            return run_on_hardware(*o, *model_dir);
          }};
}

} // namespace kvtier::cli
