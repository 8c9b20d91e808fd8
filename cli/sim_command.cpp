// `kvtier sim`: replays a trace through the actor graph on the simulated
// backend (or, with --cache-only, through the block manager alone).

#include "cli/commands.hpp"
#include "cli/sim_inputs.hpp"
#include "runtime/config.hpp"
#include "runtime/config_names.hpp"
#include "runtime/config_overrides.hpp"
#include "runtime/embedded_files.hpp"
#include "runtime/error.hpp"
#include "runtime/text_file.hpp"
#include "runtime/units.hpp"
#include "sim/cache_only.hpp"
#include "sim/cluster_report.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/configured_run.hpp"
#include "sim/oracle_bound.hpp"
#include "actors/tier_policy.hpp"
#include "sim/policy_standing.hpp"
#include "cache/gap.hpp"
#include "run/report.hpp"
#include "sim/simulation.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>

namespace kvtier::cli {

// The config flags the user gave (CLI11 counts them), as overrides.
config_overrides overrides_of(const sim_cli_options& o, const CLI::App& app) {
  config_overrides v;
  auto given = [&](const char* flag, const std::string& text, std::optional<std::string>& out) {
    if (app.get_option_no_throw(flag) && app.count(flag) > 0)
      out = text;
  };
  given("--hbm", o.hbm, v.hbm);
  given("--dram", o.dram, v.dram);
  given("--nvme", o.nvme, v.nvme);
  given("--trace", o.trace_path, v.trace);
  given("--format", o.format, v.format);
  given("--max-requests", o.max_requests, v.max_requests);
  given("--time-scale", o.time_scale, v.time_scale);
  v.skip_bad = o.skip_bad;
  return v;
}

namespace {

int fail(const std::string& message) {
  fmt::print(stderr, "kvtier sim: {}\n", message);
  return 2;
}

// Writes one of the run's outputs; false (having said why) when it cannot.
bool write_output(const char* flag, const std::string& path, const std::string& text) {
  if (auto err = write_text_file(path, text)) {
    fail(fmt::format("{}: {}", flag, describe(err)));
    return false;
  }
  return true;
}

} // namespace

caf::expected<config> load(const sim_cli_options& o) {
  caf::expected<config> cfg = o.config_path.empty()
      ? parse_config(*embedded_file("default.toml"), "<built-in>/configs/default.toml")
      : load_config(o.config_path);
  if (!cfg)
    return cfg;
  if (auto err = apply_overrides(*cfg, o.given))
    return err;
  return cfg;
}

caf::expected<sim::trace> load_trace(const config& cfg) {
  return sim::read_configured_trace(cfg);
}

namespace {

// [cluster]: replicas behind a router, each on its own virtual clock, in lockstep (docs/cluster.md).
int run_cluster_sim(const sim_cli_options& o, const config& cfg, sim::trace trace) {
  if (!o.steps_csv.empty() || !o.chrome_trace.empty())
    return fail("--steps-csv and --chrome-trace are single-node outputs; a [cluster] run reports per replica");
  auto source = trace.source;
  auto result = sim::run_cluster(cfg, sim::requests_from(std::move(trace)));
  if (auto untrusted = sim::untrusted_run(result))
    return fail(describe(untrusted));
  auto j = sim::cluster_json(cfg, result,
                             {o.config_path.empty() ? "<built-in>/configs/default.toml" : o.config_path, source});
  fmt::print("{}", sim::cluster_table(j));
  if (!o.json_out.empty() && !write_output("--json-out", o.json_out, j.dump(2) + "\n"))
    return 2;
  return 0;
}

int run_sim(const sim_cli_options& o) {
  // Flags of the other mode would be silently ignored.
  if (!o.cache_only && (o.unbounded || o.oracle))
    return fail(fmt::format("{} needs --cache-only", o.unbounded ? "--unbounded" : "--oracle"));
  if (o.cache_only && o.against_lru)
    return fail("--against-lru needs a timed run; --cache-only prints LRU's standing from cache/'s replay");
  if (o.cache_only && (!o.steps_csv.empty() || !o.chrome_trace.empty()))
    return fail(fmt::format("{} needs a timed run; --cache-only has no steps or timeline",
                            o.steps_csv.empty() ? "--chrome-trace" : "--steps-csv"));
  auto cfg = load(o);
  if (!cfg)
    return fail(describe(cfg.error()));
  auto trace = load_trace(*cfg);
  if (!trace)
    return fail(describe(trace.error()));
  if (trace->skipped_rows > 0) {
    fmt::print(stderr, "kvtier sim: skipped {} bad rows of {}, e.g.:\n", trace->skipped_rows, trace->source);
    for (const auto& e : trace->skipped_examples)
      fmt::print(stderr, "  {}\n", e);
  }

  if (o.cache_only) {
    auto started = std::chrono::steady_clock::now();
    uint64_t hbm_blocks = 0;
    if (o.unbounded)
      for (const auto& r : trace->requests)
        hbm_blocks += (r.input_tokens + cfg->cache.block_tokens - 1) / cfg->cache.block_tokens;
    // The block manager runs LRU in either hierarchy; other policies run in
    // cache/'s tier replay, whose standing is printed below.
    bool block_manager = cfg->cache.policy == eviction_policy::lru || cfg->cache.policy == eviction_policy::oracle;
    auto result = block_manager ? sim::run_cache_only(*cfg, *trace, hbm_blocks) : sim::cache_only_result{};
    auto j = result.to_json();
    j["trace"] = trace->source;
    j["block_tokens"] = cfg->cache.block_tokens;
    j["hbm_blocks"] = hbm_blocks ? hbm_blocks : cfg->hbm_blocks();
    j["dram_blocks"] = cfg->dram_blocks();
    j["nvme_blocks"] = cfg->nvme_blocks();
    fmt::print("kvtier cache-only replay of {} ({} requests, blocks of {} tokens)\n", trace->source,
               trace->requests.size(), cfg->cache.block_tokens);
    if (block_manager)
      fmt::print("  prefix hit ratio   {:.5f} ({} of {} blocks: hbm {}, dram {}, nvme {})\n", result.hit_ratio(),
                 result.blocks.prompt_blocks - result.blocks.miss_blocks, result.blocks.prompt_blocks,
                 j["prefix_hit_blocks"]["hbm"].get<uint64_t>(), j["prefix_hit_blocks"]["dram"].get<uint64_t>(),
                 j["prefix_hit_blocks"]["nvme"].get<uint64_t>());
    if (o.oracle || cfg->cache.policy == eviction_policy::oracle) {
      uint64_t capacity =
          hbm_blocks ? hbm_blocks : uint64_t{cfg->hbm_blocks()} + cfg->dram_blocks() + cfg->nvme_blocks();
      auto bound = sim::oracle_prefix_hits(*trace, cfg->cache.block_tokens, capacity);
      fmt::print(
          "  oracle bound       {:.5f} ({} of {} blocks; Belady over one pool of {} blocks, all tiers together)\n",
          bound.hit_ratio(), bound.hit_blocks, bound.blocks, capacity);
      j["oracle"] = {{"capacity_blocks", capacity},
                     {"hit_blocks", bound.hit_blocks},
                     {"prefix_hit_ratio", bound.hit_ratio()},
                     {"evictions", bound.evictions}};
    }
    auto chains = sim::dense_chains_of(*trace, cfg->cache.block_tokens);
    auto policy =
        cfg->cache.policy == eviction_policy::oracle ? cache::policy_kind::lru : sim::policy_kind_of(cfg->cache.policy);
    std::array<uint64_t, 3> capacities{hbm_blocks ? hbm_blocks : cfg->hbm_blocks(), cfg->dram_blocks(),
                                       cfg->nvme_blocks()};
    auto standing = sim::measure_policy(chains, capacities, policy, sim::hierarchy_kind_of(cfg->cache.hierarchy));
    if (block_manager)
      sim::stand_for_lru(standing,
                         {result.blocks.tiers[0].prefix_hit_blocks, result.blocks.tiers[1].prefix_hit_blocks,
                          result.blocks.tiers[2].prefix_hit_blocks},
                         result.blocks.prompt_blocks);
    j["policy"] = sim::to_json(standing);
    if (!block_manager) {
      const auto& r = standing.replay;
      fmt::print("  prefix hit ratio   {:.5f} ({} of {} blocks: hbm {}, dram {}, nvme {}; {} {} in cache/'s tier "
                 "replay)\n",
                 r.hit_ratio(), r.hit_blocks(), r.blocks, r.tiers[0].hits, r.tiers[1].hits, r.tiers[2].hits,
                 cache::name_of(policy), j["policy"]["hierarchy"].get<std::string>());
      j["prefix_hit_ratio"] = r.hit_ratio();
      j["requests"] = r.requests;
    }
    fmt::print("  policy {} ({}), through each tier: hit ratio / LRU / Belady for the same memory / gap closed\n",
               cache::name_of(policy), j["policy"]["hierarchy"].get<std::string>());
    fmt::print("{}", sim::standing_lines(standing));
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    j["wall_seconds"] = wall;
    fmt::print("  wall               {:.2f} s\n", wall);
    if (!o.json_out.empty() && !write_output("--json-out", o.json_out, j.dump(2) + "\n"))
      return 2;
    return 0;
  }

  if (auto refused = sim::timed_run_refusal(*cfg))
    return fail(describe(refused));
  if (cfg->cluster.active()) {
    if (o.against_lru)
      return fail("--against-lru: the cluster simulation ([cluster]) has no LRU twin yet; run without it");
    return run_cluster_sim(o, *cfg, std::move(*trace));
  }
  double horizon = trace->requests.empty() ? 0 : trace->requests.back().arrival_s;
  sim::sim_options so;
  so.record_steps = !o.steps_csv.empty();
  so.record_timeline = !o.chrome_trace.empty();
  bool tty = !o.quiet && isatty(STDERR_FILENO);
  if (tty)
    so.progress = [horizon](double t, uint64_t done, uint64_t total) {
      int width = 30;
      int filled = total ? static_cast<int>(width * done / total) : width;
      fmt::print(stderr, "\r  [{:<{}}] {}/{} requests, {:.0f}/{:.0f} s simulated", std::string(filled, '#'), width,
                 done, total, t, horizon);
    };
  auto source = trace->source;
  auto policy = tier_policy_kind(cfg->cache.policy).value_or(cache::policy_kind::lru);
  // The policy's standing (its replay, LRU's and Belady's for the same
  // memory) needs only the trace: it is measured on another thread while the
  // simulation runs, from a copy of the trace the run consumes.
  std::future<sim::policy_standing> standing_beside;
  if (!o.no_bound)
    standing_beside = std::async(
        std::launch::async,
        [copy = *trace, block_tokens = cfg->cache.block_tokens,
         capacities = std::array<uint64_t, 3>{cfg->hbm_blocks(), cfg->dram_blocks(), cfg->nvme_blocks()}, policy,
         hierarchy = sim::hierarchy_kind_of(cfg->cache.hierarchy)] {
          return sim::measure_policy(sim::dense_chains_of(copy, block_tokens), capacities, policy, hierarchy);
        });
  // The LRU twin: the same config and trace, evicting by LRU.
  // The LRU twin runs beside this run: two simulations share nothing but
  // the trace they each copy.
  std::future<run_result> twin_beside;
  if (o.against_lru && policy != cache::policy_kind::lru) {
    auto lru_cfg = *cfg;
    lru_cfg.cache.policy = eviction_policy::lru;
    auto twin_options = so;
    twin_options.progress = nullptr;
    twin_beside = std::async(std::launch::async, [lru_cfg, copy = *trace, twin_options]() mutable {
      return sim::run_simulation(lru_cfg, sim::requests_from(std::move(copy)), twin_options);
    });
  }
  auto result = sim::run_simulation(*cfg, sim::requests_from(std::move(*trace)), so);
  std::optional<run_result> twin;
  if (twin_beside.valid())
    twin = twin_beside.get();
  if (tty)
    fmt::print(stderr, "\n");
  // A saturated clock voids every figure: nothing is printed or written.
  auto untrusted = sim::untrusted_run(result);
  if (untrusted && sim::clock_saturated(result))
    return fail(describe(untrusted));
  if (twin)
    if (auto twin_untrusted = sim::untrusted_run(*twin))
      return fail("the LRU twin: " + describe(twin_untrusted));
  auto j =
      report_json(*cfg, result, {o.config_path.empty() ? "<built-in>/configs/default.toml" : o.config_path, source});
  fmt::print("{}", report_table(j));
  auto hits_of = [](const run_result& r) {
    const auto& b = r.metrics.blocks;
    return sim::timed_hits{{b.tiers[0].prefix_hit_blocks, b.tiers[1].prefix_hit_blocks, b.tiers[2].prefix_hit_blocks},
                           b.prompt_blocks};
  };
  nlohmann::json ttft_change;
  std::string ttft_line;
  if (twin) {
    auto lru_json = report_json(*cfg, *twin, {"", source});
    const auto &mine = j["ttft_ms"], &theirs = lru_json["ttft_ms"];
    auto change = [&](const char* p) {
      double base = theirs[p].get<double>();
      return base > 0 ? mine[p].get<double>() / base - 1 : 0.0;
    };
    ttft_change = {{"p50", change("p50")}, {"p99", change("p99")}, {"lru_ttft_ms", theirs}};
    ttft_line = fmt::format("p50 {:.1f} ms against LRU's {:.1f} ({:+.1f}%), p99 {:.1f} ms against {:.1f} ({:+.1f}%)",
                            mine["p50"].get<double>(), theirs["p50"].get<double>(), 100 * change("p50"),
                            mine["p99"].get<double>(), theirs["p99"].get<double>(), 100 * change("p99"));
  } else if (policy == cache::policy_kind::lru) {
    ttft_change = {{"p50", 0.0}, {"p99", 0.0}};
    ttft_line = "none (this run is LRU)";
  } else {
    ttft_line = "not measured (--against-lru runs the LRU twin of this config)";
  }
  if (standing_beside.valid()) {
    auto standing = standing_beside.get();
    auto from = sim::stand_timed(standing, hits_of(result),
                                 twin ? std::optional(hits_of(*twin)) : std::optional<sim::timed_hits>());
    static constexpr std::array<const char*, 3> lru_names{"this run", "the LRU twin", "cache/'s replay"};
    j["policy"] = sim::to_json(standing);
    j["policy"]["lru_from"] = lru_names[static_cast<size_t>(from)];
    fmt::print("  policy {} ({}) in the block manager; through each tier: hit ratio / LRU ({}) / Belady for the same "
               "memory / gap closed\n{}",
               cache::name_of(policy), j["policy"]["hierarchy"].get<std::string>(),
               lru_names[static_cast<size_t>(from)], sim::standing_lines(standing));
  } else {
    j["policy"] = {{"policy", std::string(cache::name_of(policy))}};
  }
  j["policy"]["ttft_change_vs_lru"] = ttft_change;
  fmt::print("  TTFT against LRU             {}\n", ttft_line);
  if (!o.json_out.empty() && !write_output("--json-out", o.json_out, j.dump(2) + "\n"))
    return 2;
  if (!o.steps_csv.empty() && !write_output("--steps-csv", o.steps_csv, steps_csv(result)))
    return 2;
  if (!o.chrome_trace.empty() && !write_output("--chrome-trace", o.chrome_trace, chrome_trace(result).dump()))
    return 2;
  if (untrusted)
    return fail(describe(untrusted));
  return 0;
}

} // namespace

command add_sim_command(CLI::App& app) {
  auto o = std::make_shared<sim_cli_options>();
  auto* sub = app.add_subcommand("sim", "Replay a request trace through kvtier on the simulated backend");
  sub->add_option("config", o->config_path, "experiment config (TOML); default: the built-in Llama-3-8B on H200");
  sub->add_option("--trace", o->trace_path, "trace file (default: the bundled Mooncake conversation trace)");
  sub->add_option("--format", o->format, "trace format: auto, mooncake, azure, burstgpt, synthetic");
  sub->add_option("--json-out", o->json_out, "write the report as JSON");
  sub->add_option("--steps-csv", o->steps_csv, "write a per-step time series as CSV");
  sub->add_option("--chrome-trace", o->chrome_trace, "write a Chrome trace of compute and transfers");
  sub->add_option("--hbm", o->hbm, "override the HBM KV capacity, e.g. 40GB, or auto");
  sub->add_option("--dram", o->dram, "override the DRAM tier capacity (0 disables it)");
  sub->add_option("--nvme", o->nvme, "override the NVMe tier capacity (0 disables it)");
  sub->add_option("--max-requests", o->max_requests, "replay only the first N requests");
  sub->add_option("--time-scale", o->time_scale, "multiply arrival times (0.5 = twice the load)");
  sub->add_flag("--cache-only", o->cache_only, "replay block accesses only, without timing");
  sub->add_flag("--unbounded", o->unbounded, "with --cache-only: HBM large enough for every block");
  sub->add_flag("--oracle", o->oracle, "with --cache-only: also the Belady bound for the same memory");
  sub->add_flag("--against-lru", o->against_lru,
                "timed runs with a [cache] policy other than lru: also run the config under LRU and report the "
                "TTFT change and LRU's hits from that run");
  sub->add_flag("--no-bound", o->no_bound,
                "timed runs: skip the Belady bound for the same memory (a cache-only replay of the trace)");
  sub->add_flag("--skip-bad", o->skip_bad, "skip and count bad trace rows instead of stopping");
  sub->add_flag("--quiet", o->quiet, "no progress bar");
  return {sub, [o, sub] {
            o->given = overrides_of(*o, *sub);
            return run_sim(*o);
          }};
}

} // namespace kvtier::cli
