// `kvtier sim`: replays a trace through the actor graph on the simulated
// backend (or, with --cache-only, through the block manager alone).

#include "real/real_system.hpp"
#include "cli/commands.hpp"
#include "runtime/config.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "runtime/toml_reader.hpp"
#include "runtime/units.hpp"
#include "sim/cache_only.hpp"
#include "sim/oracle_bound.hpp"
#include "run/report.hpp"
#include "sim/simulation.hpp"
#include "sim/synthetic_spec.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <memory>

namespace kvtier::cli {
namespace {

struct sim_cli_options {
  std::string config_path;
  std::string trace_path;
  std::string format;
  std::string json_out;
  std::string steps_csv;
  std::string chrome_trace;
  std::string hbm, dram, nvme;
  uint64_t max_requests = 0;
  double time_scale = 0;
  bool cache_only = false;
  bool oracle = false;
  bool unbounded = false;
  bool skip_bad = false;
  bool quiet = false;
  // kvtier run
  std::string device = "auto";
  double compute_scale = 1.0;
};

int fail(const std::string& message) {
  fmt::print(stderr, "kvtier sim: {}\n", message);
  return 2;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

caf::expected<config> load(const sim_cli_options& o) {
  caf::expected<config> cfg = o.config_path.empty()
                                ? parse_config(*embedded_file("default.toml"), "<built-in>/configs/default.toml")
                                : load_config(o.config_path);
  if (!cfg)
    return cfg;
  auto set = [&](const std::string& text, const char* flag, auto apply) -> caf::error {
    if (text.empty())
      return {};
    auto bytes = parse_bytes(text);
    if (!bytes)
      return make_error(errc::invalid_argument, fmt::format("{}: {}", flag, describe(bytes.error())));
    apply(*bytes);
    return {};
  };
  if (auto err = set(o.hbm, "--hbm", [&](uint64_t b) { cfg->tiers.hbm.capacity_bytes = b; }))
    return err;
  if (auto err = set(o.dram, "--dram", [&](uint64_t b) { cfg->tiers.dram = {b > 0, b}; }))
    return err;
  if (auto err = set(o.nvme, "--nvme", [&](uint64_t b) { cfg->tiers.nvme = {b > 0, b}; }))
    return err;
  if (!o.trace_path.empty())
    cfg->sim.trace = o.trace_path;
  if (!o.format.empty())
    cfg->sim.trace_format = o.format;
  if (o.max_requests)
    cfg->sim.max_requests = o.max_requests;
  if (o.time_scale > 0)
    cfg->sim.time_scale = o.time_scale;
  cfg->sim.skip_bad = cfg->sim.skip_bad || o.skip_bad;
  return cfg;
}

caf::expected<sim::trace> load_trace(const config& cfg, const sim_cli_options& o) {
  if (cfg.sim.trace_format == "synthetic") {
    if (!cfg.sim.has_synthetic)
      return make_error(errc::invalid_config,
                        fmt::format("{}: [sim] trace_format: \"synthetic\" needs a [sim.synthetic] table", cfg.source));
    auto root = parse_toml_file(o.config_path);
    if (!root)
      return std::move(root.error());
    auto spec = sim::parse_synthetic_spec(*(*root)["sim"]["synthetic"].as_table(), o.config_path);
    if (!spec)
      return std::move(spec.error());
    return sim::generate_synthetic(*spec);
  }
  sim::trace_read_options ro;
  ro.skip_bad = cfg.sim.skip_bad;
  ro.max_requests = cfg.sim.max_requests;
  ro.time_scale = cfg.sim.time_scale;
  ro.block_tokens = cfg.sim.trace_block_tokens;
  auto format = sim::parse_trace_format(cfg.sim.trace_format);
  if (!format)
    return std::move(format.error());
  auto path = cfg.sim.trace.empty() ? sim::default_trace_path() : cfg.sim.trace;
  return sim::read_trace(path, *format, ro);
}

int run_sim(const sim_cli_options& o) {
  auto cfg = load(o);
  if (!cfg)
    return fail(describe(cfg.error()));
  auto trace = load_trace(*cfg, o);
  if (!trace)
    return fail(describe(trace.error()));
  if (trace->skipped_rows > 0) {
    fmt::print(stderr, "kvtier sim: skipped {} bad rows of {}, e.g.:\n", trace->skipped_rows, trace->source);
    for (const auto& e : trace->skipped_examples)
      fmt::print(stderr, "  {}\n", e);
  }

  if (o.cache_only) {
    uint64_t hbm_blocks = 0;
    if (o.unbounded)
      for (const auto& r : trace->requests)
        hbm_blocks += (r.input_tokens + cfg->cache.block_tokens - 1) / cfg->cache.block_tokens;
    auto result = sim::run_cache_only(*cfg, *trace, hbm_blocks);
    auto j = result.to_json();
    j["trace"] = trace->source;
    j["block_tokens"] = cfg->cache.block_tokens;
    j["hbm_blocks"] = hbm_blocks ? hbm_blocks : cfg->hbm_blocks();
    j["dram_blocks"] = cfg->dram_blocks();
    j["nvme_blocks"] = cfg->nvme_blocks();
    fmt::print("kvtier cache-only replay of {} ({} requests, blocks of {} tokens)\n", trace->source, result.requests,
               cfg->cache.block_tokens);
    fmt::print("  prefix hit ratio   {:.5f} ({} of {} blocks: hbm {}, dram {}, nvme {})\n", result.hit_ratio(),
               result.blocks.prompt_blocks - result.blocks.miss_blocks, result.blocks.prompt_blocks,
               j["prefix_hit_blocks"]["hbm"].get<uint64_t>(), j["prefix_hit_blocks"]["dram"].get<uint64_t>(),
               j["prefix_hit_blocks"]["nvme"].get<uint64_t>());
    if (o.oracle || cfg->cache.policy == "oracle") {
      uint64_t capacity = hbm_blocks ? hbm_blocks : uint64_t{cfg->hbm_blocks()} + cfg->dram_blocks() + cfg->nvme_blocks();
      auto bound = sim::oracle_prefix_hits(*trace, cfg->cache.block_tokens, capacity);
      fmt::print("  oracle bound       {:.5f} ({} of {} blocks; Belady over one pool of {} blocks, all tiers together)\n",
                 bound.hit_ratio(), bound.hit_blocks, bound.blocks, capacity);
      j["oracle"] = {{"capacity_blocks", capacity}, {"hit_blocks", bound.hit_blocks}, {"prefix_hit_ratio", bound.hit_ratio()},
                     {"evictions", bound.evictions}};
    }
    fmt::print("  wall               {:.2f} s\n", result.wall_seconds);
    if (!o.json_out.empty() && !write_file(o.json_out, j.dump(2) + "\n"))
      return fail(fmt::format("--json-out: cannot write {}", o.json_out));
    return 0;
  }

  if (cfg->cache.policy == "oracle")
    return fail(fmt::format("{}: [cache] policy = \"oracle\" knows the future and bounds what any policy can reach; it runs "
                            "with --cache-only (timed runs use \"lru\")", cfg->source));
  double horizon = trace->requests.empty() ? 0 : trace->requests.back().arrival_s;
  sim::sim_options so;
  so.record_steps = !o.steps_csv.empty();
  so.record_timeline = !o.chrome_trace.empty();
  bool tty = !o.quiet && isatty(STDERR_FILENO);
  if (tty)
    so.progress = [horizon](double t, uint64_t done, uint64_t total) {
      int width = 30;
      int filled = total ? static_cast<int>(width * done / total) : width;
      fmt::print(stderr, "\r  [{:<{}}] {}/{} requests, {:.0f}/{:.0f} s simulated", std::string(filled, '#'), width, done,
                 total, t, horizon);
    };
  auto source = trace->source;
  auto result = sim::run_simulation(*cfg, sim::requests_from(std::move(*trace)), so);
  if (tty)
    fmt::print(stderr, "\n");
  auto j = report_json(*cfg, result,
                            {o.config_path.empty() ? "<built-in>/configs/default.toml" : o.config_path, source});
  fmt::print("{}", report_table(j));
  if (!o.json_out.empty() && !write_file(o.json_out, j.dump(2) + "\n"))
    return fail(fmt::format("--json-out: cannot write {}", o.json_out));
  if (!o.steps_csv.empty() && !write_file(o.steps_csv, steps_csv(result)))
    return fail(fmt::format("--steps-csv: cannot write {}", o.steps_csv));
  if (!o.chrome_trace.empty() && !write_file(o.chrome_trace, chrome_trace(result).dump()))
    return fail(fmt::format("--chrome-trace: cannot write {}", o.chrome_trace));
  uint64_t settled = result.metrics.scheduler.requests_completed + result.metrics.scheduler.requests_rejected;
  if (settled != result.requests_total) {
    const auto& s = result.metrics.scheduler;
    return fail(fmt::format("{} requests neither completed nor rejected (at the last idle point: {} waiting, {} "
                            "loading, {} running, {} swapped)",
                            result.requests_total - settled, s.idle_waiting, s.idle_loading, s.idle_running,
                            s.idle_swapped));
  }
  return 0;
}

int run_on_hardware(const sim_cli_options& o) {
  auto cfg = load(o);
  if (!cfg)
    return fail(describe(cfg.error()));
  if (cfg->backend != "real")
    fmt::print(stderr, "kvtier run: {} says backend = \"{}\"; running it on the real backend anyway\n", cfg->source,
               cfg->backend);
  auto trace = load_trace(*cfg, o);
  if (!trace)
    return fail(describe(trace.error()));
  auto source = trace->source;
  std::vector<real_run_request> requests;
  for (auto& r : sim::requests_from(std::move(*trace)))
    requests.push_back({r.arrival_s, std::move(r.spec)});
  real_run_options ro;
  ro.backend.device = o.device;
  ro.backend.compute_time_scale = o.compute_scale;
  ro.arrival_time_scale = 1.0; // the trace reader already applied [sim] time_scale
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
  fmt::print("{}", report_table(j));
  if (!o.json_out.empty() && !write_file(o.json_out, j.dump(2) + "\n"))
    return fail(fmt::format("--json-out: cannot write {}", o.json_out));
  return 0;
}

} // namespace

command add_run_command(CLI::App& app) {
  auto o = std::make_shared<sim_cli_options>();
  auto* sub = app.add_subcommand("run", "Serve a request trace on real hardware: real copies (CUDA or the CPU twin), "
                                        "real NVMe I/O, a stand-in compute port on the wall clock");
  sub->add_option("config", o->config_path, "config (TOML) with backend = \"real\"")->required();
  sub->add_option("--trace", o->trace_path, "trace file (default: the bundled Mooncake conversation trace)");
  sub->add_option("--format", o->format, "trace format: auto, mooncake, azure, burstgpt, synthetic");
  sub->add_option("--json-out", o->json_out, "write the report as JSON");
  sub->add_option("--max-requests", o->max_requests, "serve only the first N requests");
  sub->add_option("--time-scale", o->time_scale, "multiply arrival times (0.01 = 100x faster)");
  sub->add_option("--device", o->device, "copy engine: auto (GPU if usable), cuda, cpu")->capture_default_str();
  sub->add_option("--compute-scale", o->compute_scale, "multiply the stand-in model's step time (0 = instant)")
    ->capture_default_str();
  sub->add_flag("--skip-bad", o->skip_bad, "skip and count bad trace rows instead of stopping");
  sub->add_flag("--quiet", o->quiet, "no progress line");
  return {sub, [o] { return run_on_hardware(*o); }};
}

command add_sim_command(CLI::App& app) {
  auto o = std::make_shared<sim_cli_options>();
  auto* sub = app.add_subcommand("sim", "Replay a request trace through kvtier on the simulated backend");
  sub->add_option("config", o->config_path, "experiment config (TOML); default: the built-in Llama-3-8B on H200");
  sub->add_option("--trace", o->trace_path, "trace file (default: the bundled Mooncake conversation trace)");
  sub->add_option("--format", o->format, "trace format: auto, mooncake, azure, burstgpt, synthetic");
  sub->add_option("--json-out", o->json_out, "write the report as JSON");
  sub->add_option("--steps-csv", o->steps_csv, "write a per-step time series as CSV");
  sub->add_option("--chrome-trace", o->chrome_trace, "write a Chrome trace of compute and transfers");
  sub->add_option("--hbm", o->hbm, "override the HBM KV capacity, e.g. 40GB");
  sub->add_option("--dram", o->dram, "override the DRAM tier capacity (0 disables it)");
  sub->add_option("--nvme", o->nvme, "override the NVMe tier capacity (0 disables it)");
  sub->add_option("--max-requests", o->max_requests, "replay only the first N requests");
  sub->add_option("--time-scale", o->time_scale, "multiply arrival times (0.5 = twice the load)");
  sub->add_flag("--cache-only", o->cache_only, "replay block accesses only, without timing");
  sub->add_flag("--unbounded", o->unbounded, "with --cache-only: HBM large enough for every block");
  sub->add_flag("--oracle", o->oracle, "with --cache-only: also the Belady bound for the same memory");
  sub->add_flag("--skip-bad", o->skip_bad, "skip and count bad trace rows instead of stopping");
  sub->add_flag("--quiet", o->quiet, "no progress bar");
  return {sub, [o] { return run_sim(*o); }};
}

} // namespace kvtier::cli
