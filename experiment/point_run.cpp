#include "experiment/point_run.hpp"

#include "cache/gap.hpp"
#include "run/report.hpp"
#include "runtime/error.hpp"
#include "sim/cache_only.hpp"
#include "sim/cluster_report.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/configured_run.hpp"
#include "sim/policy_standing.hpp"
#include "sim/simulation.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace kvtier::experiment {
namespace {

nlohmann::json cache_only_summary(const config& cfg, const sim::trace& trace) {
  bool block_manager = cfg.cache.hierarchy == cache_hierarchy::inclusive && cfg.cache.policy == eviction_policy::lru;
  auto policy = sim::policy_kind_of(cfg.cache.policy);
  std::array<uint64_t, 3> capacities{cfg.hbm_blocks(), cfg.dram_blocks(), cfg.nvme_blocks()};
  auto standing = sim::measure_policy(sim::dense_chains_of(trace, cfg.cache.block_tokens), capacities, policy,
                                      sim::hierarchy_kind_of(cfg.cache.hierarchy));
  nlohmann::json j{{"requests_total", trace.requests.size()}, {"policy", sim::to_json(standing)}};
  double hit_ratio = standing.replay.hit_ratio();
  if (block_manager) {
    // The block manager's own hits stand for LRU, as `kvtier sim --cache-only` prints them.
    auto bm = sim::run_cache_only(cfg, trace);
    hit_ratio = bm.hit_ratio();
    uint64_t hits = 0;
    for (size_t t = 0; t < 3; ++t) {
      hits += bm.blocks.tiers[t].prefix_hit_blocks;
      if (auto& ts = standing.through[t]) {
        ts->hit_ratio = bm.blocks.prompt_blocks ? double(hits) / double(bm.blocks.prompt_blocks) : 0.0;
        ts->lru_hit_ratio = ts->hit_ratio;
        ts->gap_closed = cache::gap_closed(ts->hit_ratio, ts->lru_hit_ratio, ts->belady_hit_ratio);
      }
    }
    j["policy"] = sim::to_json(standing);
  }
  // The deepest tier present: all memory together.
  for (size_t t = 3; t-- > 0;)
    if (const auto& ts = standing.through[t]) {
      j["lru_hit_ratio"] = ts->lru_hit_ratio;
      j["belady_hit_ratio"] = ts->belady_hit_ratio;
      j["capacity_blocks"] = ts->capacity_through;
      break;
    }
  j["prefix_hit_ratio"] = hit_ratio;
  return j;
}

// A cluster point: the cluster's report (sim/cluster_report.hpp) and its
// latency distributions; its replicas' series stay in their own reports.
caf::expected<nlohmann::json> cluster_summary(const config& cfg, sim::trace trace) {
  auto source = trace.source;
  auto result = sim::run_cluster(cfg, sim::requests_from(std::move(trace)));
  if (auto untrusted = sim::untrusted_run(result))
    return untrusted;
  auto j = sim::cluster_json(cfg, result, {cfg.source, source});
  j["ttft_quantiles_ms"] = quantiles_ms(result.ttft_s);
  j["tpot_quantiles_ms"] = quantiles_ms(result.tpot_s);
  return j;
}

} // namespace

nlohmann::json quantiles_ms(std::vector<double> seconds) {
  auto out = nlohmann::json::array();
  if (seconds.empty())
    return out;
  std::sort(seconds.begin(), seconds.end());
  for (int q = 0; q <= 100; q += 2) {
    double pos = q / 100.0 * static_cast<double>(seconds.size() - 1);
    auto lo = static_cast<size_t>(std::floor(pos));
    auto hi = std::min(lo + 1, seconds.size() - 1);
    double v = seconds[lo] + (seconds[hi] - seconds[lo]) * (pos - static_cast<double>(lo));
    out.push_back(std::round(v * 1e6) / 1e3); // ms, to the microsecond
  }
  return out;
}

nlohmann::json time_series(const config& cfg, const run_result& r) {
  double end = std::max(r.simulated_seconds, 1e-9);
  double width = end / series_bins;
  std::array<std::vector<double>, 2> occupancy{std::vector<double>(series_bins), std::vector<double>(series_bins)};
  std::array<double, 2> capacity{double(cfg.hbm_blocks()), double(cfg.dram_blocks())};
  for (const auto& s : r.metrics.steps) {
    auto bin = std::min(series_bins - 1, static_cast<size_t>(s.time_s / width));
    std::array<double, 2> used{double(s.hbm_used), double(s.dram_used)};
    for (size_t t = 0; t < 2; ++t)
      if (capacity[t] > 0)
        occupancy[t][bin] = std::max(occupancy[t][bin], used[t] / capacity[t]);
  }
  // Bytes of each transfer spread evenly over its duration: GB/s per bin.
  std::array<std::vector<double>, 4> gbps;
  for (auto& g : gbps)
    g.assign(series_bins, 0);
  for (const auto& e : r.timeline) {
    if (e.where == timeline_event::lane::compute)
      continue;
    auto& g = gbps[static_cast<size_t>(e.where) - 1];
    double span = std::max(e.end_s - e.start_s, 1e-12);
    auto first = std::min(series_bins - 1, static_cast<size_t>(e.start_s / width));
    auto last = std::min(series_bins - 1, static_cast<size_t>(e.end_s / width));
    for (size_t b = first; b <= last; ++b) {
      double lo = std::max(e.start_s, double(b) * width);
      double hi = std::min(e.end_s, double(b + 1) * width);
      if (hi > lo)
        g[b] += double(e.bytes) * (hi - lo) / span / width / 1e9;
    }
  }
  auto rounded = [](const std::vector<double>& v) {
    auto out = nlohmann::json::array();
    for (double x : v)
      out.push_back(std::round(x * 1e4) / 1e4);
    return out;
  };
  return {{"bin_seconds", width},
          {"hbm_occupancy", rounded(occupancy[0])},
          {"dram_occupancy", rounded(occupancy[1])},
          {"pcie_h2d_gbps", rounded(gbps[0])},
          {"pcie_d2h_gbps", rounded(gbps[1])},
          {"nvme_read_gbps", rounded(gbps[2])},
          {"nvme_write_gbps", rounded(gbps[3])},
          {"limits_gbps",
           {{"pcie_h2d", r.h2d.limit_gbps},
            {"pcie_d2h", r.d2h.limit_gbps},
            {"nvme_read", r.nvme_read.limit_gbps},
            {"nvme_write", r.nvme_write.limit_gbps}}}};
}

caf::expected<nlohmann::json> run_point(const config& cfg, run_mode mode) {
  auto trace = sim::read_configured_trace(cfg);
  if (!trace)
    return std::move(trace.error());
  if (mode == run_mode::cache_only) {
    if (cfg.cluster.active())
      return make_error(errc::invalid_config,
                        fmt::format("{}: [cluster] (replicas > 1, prefill/decode pools or a remote tier) makes this "
                                    "point a cluster, and a cache-only replay runs one node's tiers; a cluster point "
                                    "runs with mode = \"timed\"",
                                    cfg.source));
    return cache_only_summary(cfg, *trace);
  }
  if (auto refused = sim::timed_run_refusal(cfg))
    return refused;
  if (cfg.cluster.active())
    return cluster_summary(cfg, std::move(*trace));
  sim::sim_options so;
  so.record_steps = true;
  so.record_timeline = true;
  auto source = trace->source;
  auto result = sim::run_simulation(cfg, sim::requests_from(std::move(*trace)), so);
  if (auto untrusted = sim::untrusted_run(result))
    return untrusted;
  auto j = report_json(cfg, result, {cfg.source, source});
  const auto& s = result.metrics.scheduler;
  j["max_batch"] = s.max_batch_size;
  j["ttft_quantiles_ms"] = quantiles_ms(s.ttft_s);
  j["tpot_quantiles_ms"] = quantiles_ms(s.tpot_s);
  j["series"] = time_series(cfg, result);
  return j;
}

} // namespace kvtier::experiment
