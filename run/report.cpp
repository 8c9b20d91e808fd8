#include "run/report.hpp"

#include "runtime/config_names.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace kvtier {
namespace {

double percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty())
    return 0;
  double pos = q * static_cast<double>(sorted.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  auto hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

nlohmann::json ms(const percentiles& p) {
  return {{"p50", p.p50 * 1e3}, {"p90", p.p90 * 1e3}, {"p99", p.p99 * 1e3}};
}

double ratio(uint64_t a, uint64_t b) {
  return b > 0 ? double(a) / double(b) : 0.0;
}

// The runs of adjacent lower-tier slots the block manager's batches came in.
nlohmann::json runs_json(const link_runs& r) {
  return {{"batches", r.batches},
          {"blocks", r.blocks},
          {"runs", r.runs},
          {"blocks_per_run", ratio(r.blocks, r.runs)},
          {"runs_per_batch", ratio(r.runs, r.batches)},
          {"demotion_batches", r.demotion_batches},
          {"demotion_blocks", r.demotion_blocks},
          {"demotion_runs", r.demotion_runs},
          {"demotion_blocks_per_run", ratio(r.demotion_blocks, r.demotion_runs)},
          {"runs_per_demotion_batch", ratio(r.demotion_runs, r.demotion_batches)}};
}

nlohmann::json link_json(const link_report& l, const link_runs& runs, double seconds) {
  double gbps = seconds > 0 ? static_cast<double>(l.bytes) / seconds / 1e9 : 0;
  double busy_gbps = l.busy_seconds > 0 ? static_cast<double>(l.bytes) / l.busy_seconds / 1e9 : 0;
  uint64_t kv_bytes = std::max(l.kv_bytes, l.bytes);
  auto per_request_ms = [&](double total) { return l.requests > 0 ? total / double(l.requests) * 1e3 : 0.0; };
  return {
      {"bytes", l.bytes},
      {"operations", l.operations},
      {"gbps", gbps},
      {"busy_gbps", busy_gbps},
      {"limit_gbps", l.limit_gbps},
      {"utilization", seconds > 0 ? l.busy_seconds / seconds : 0},
      // Quantize-on-offload: KV moved in HBM's format per second while busy (past the link's limit).
      {"kv_bytes", kv_bytes},
      {"kv_busy_gbps", l.busy_seconds > 0 ? static_cast<double>(kv_bytes) / l.busy_seconds / 1e9 : 0},
      // GPU-timed: the link's own time on the transfers, apart from the host's issuing and waiting (0: not measured).
      {"link_seconds", l.link_seconds},
      {"link_gbps", l.link_seconds > 0 ? static_cast<double>(l.bytes) / l.link_seconds / 1e9 : 0},
      // The host's part of a request's span, per request (0: not measured): its own calls, pickup to the
      // link starting, the link done to the completion seen.
      {"host_per_request_ms",
       {{"requests", l.requests},
        {"issuing", per_request_ms(l.issue_seconds)},
        {"pickup_to_link_start", per_request_ms(l.start_lag_seconds)},
        {"link_done_to_seen", per_request_ms(l.end_lag_seconds)}}},
      {"dma_runs", runs_json(runs)}};
}

} // namespace

percentiles percentiles_of(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {percentile(samples, 0.5), percentile(samples, 0.9), percentile(samples, 0.99)};
}

nlohmann::json report_json(const config& cfg, const run_result& r, const run_labels& labels) {
  const auto& s = r.metrics.scheduler;
  const auto& b = r.metrics.blocks;
  uint64_t hits = 0;
  nlohmann::json by_tier = nlohmann::json::object();
  nlohmann::json tiers = nlohmann::json::object();
  for (auto t : {tier::hbm, tier::dram, tier::nvme}) {
    const auto& m = b.tiers[index_of(t)];
    hits += m.prefix_hit_blocks;
    by_tier[std::string(name_of(t))] = b.prompt_blocks ? double(m.prefix_hit_blocks) / double(b.prompt_blocks) : 0.0;
    tiers[std::string(name_of(t))] = {
        {"capacity_blocks", m.capacity_blocks},
        {"peak_used_blocks", m.peak_used_blocks},
        {"peak_occupancy", m.capacity_blocks ? double(m.peak_used_blocks) / double(m.capacity_blocks) : 0.0},
        {"peak_cached_blocks", m.peak_cached_blocks},
        {"peak_cached_share", m.capacity_blocks ? double(m.peak_cached_blocks) / double(m.capacity_blocks) : 0.0},
        {"prefix_hit_blocks", m.prefix_hit_blocks},
        {"evictions", m.evictions},
        {"evictions_lost", m.evictions_lost},
        {"demotions", m.demotions},
        {"promotions", m.promotions},
        {"copies_dropped", m.copies_dropped},
        {"allocation_failures", m.allocation_failures},
        {"allocated", m.allocated},
        {"freed", m.freed},
    };
  }
  by_tier["miss"] = b.prompt_blocks ? double(b.miss_blocks) / double(b.prompt_blocks) : 0.0;
  double tokens = double(s.prefill_tokens + s.decode_tokens);
  nlohmann::json j{
      {"config", labels.config},
      {"trace", labels.trace},
      {"model", cfg.geometry.model.name},
      {"hardware", cfg.hardware.name},
      {"block_tokens", cfg.cache.block_tokens},
      {"bytes_per_block", cfg.geometry.bytes_per_block()},
      {"requests_total", r.requests_total},
      {"requests_arrived", s.requests_arrived},
      {"requests_completed", s.requests_completed},
      {"requests_rejected", s.requests_rejected},
      {"ttft_ms", ms(percentiles_of(s.ttft_s))},
      {"tpot_ms", ms(percentiles_of(s.tpot_s))},
      {"e2e_ms", ms(percentiles_of(s.e2e_s))},
      {"queue_ms", ms(percentiles_of(s.queue_s))},
      {"tokens_per_second", r.simulated_seconds > 0 ? tokens / r.simulated_seconds : 0},
      {"prefill_tokens", s.prefill_tokens},
      {"decode_tokens", s.decode_tokens},
      {"steps", s.steps},
      {"mean_batch", s.steps ? double(s.batch_size_sum) / double(s.steps) : 0},
      {"gpu_busy", r.simulated_seconds > 0 ? s.busy_seconds / r.simulated_seconds : 0},
      {"prefix_blocks_looked_up", b.prompt_blocks},
      {"prefix_hit_ratio", b.prompt_blocks ? double(hits) / double(b.prompt_blocks) : 0.0},
      {"prefix_hits_by_tier", by_tier},
      {"tiers", tiers},
      {"links",
       {{"pcie_h2d", link_json(r.h2d, b.runs.pcie_h2d, r.simulated_seconds)},
        {"pcie_d2h", link_json(r.d2h, b.runs.pcie_d2h, r.simulated_seconds)},
        {"nvme_read", link_json(r.nvme_read, b.runs.nvme_read, r.simulated_seconds)},
        {"nvme_write", link_json(r.nvme_write, b.runs.nvme_write, r.simulated_seconds)}}},
      {"preemptions", {{"swap", s.preemptions_swap}, {"recompute", s.preemptions_recompute}}},
      // Sequences larger than HBM: blocks their steps read from DRAM (per
      // step and sequence, summed), in the format DRAM holds them; the
      // simulation charges them to pcie_h2d, the CUDA twin copies them there.
      {"streaming",
       {{"streamed_blocks", s.streamed_blocks},
        {"streamed_bytes", s.streamed_blocks * cfg.offload_block_bytes()},
        {"streamed_steps", s.streamed_steps},
        {"spilled_blocks", b.spilled_blocks}}},
      {"rejections", s.rejections},
      {"recomputed_tokens", s.recomputed_tokens},
      {"swapped_out_blocks", b.swapped_out_blocks},
      {"failed_transfers", b.failed_transfers},
      {"reads_while_moving", b.reads_while_moving},
      {"nvme_recovered_blocks", b.nvme_recovered_blocks},
      {"lowest_tier", r.remote.used ? "remote" : "nvme"},
      {"fragmentation",
       {{"peak_unused_tokens", b.fragmentation_peak_tokens},
        {"mean_unused_tokens",
         b.fragmentation_samples ? b.fragmentation_sum_tokens / double(b.fragmentation_samples) : 0.0},
        {"mean_share_of_used",
         b.fragmentation_sum_used_tokens > 0 ? b.fragmentation_sum_tokens / b.fragmentation_sum_used_tokens : 0.0}}},
      {"cache",
       {{"policy", std::string(name_of(cfg.cache.policy))},
        {"hierarchy", std::string(name_of(cfg.cache.hierarchy))},
        {"demote_watermark", cfg.cache.demote_watermark},
        {"slot_placement", std::string(name_of(cfg.cache.slot_placement))}}},
      {"compression",
       {{"policy", std::string(name_of(cfg.compression.policy))},
        {"keep_ratio", cfg.compression.keep_ratio},
        {"offload_dtype", std::string(offload_dtype_name(cfg.compression.offload_dtype))},
        {"offload_bytes_per_block", cfg.offload_block_bytes()},
        {"runs", r.metrics.compression.runs},
        {"tokens_dropped", r.metrics.compression.tokens_dropped},
        {"blocks_dropped", r.metrics.compression.blocks_dropped},
        {"blocks_freed", r.metrics.compression.blocks_freed},
        {"stale_orders", r.metrics.compression.stale_orders},
        {"measured_quality",
         r.metrics.compression.measured_mass_runs > 0
             ? nlohmann::json{{"mass_kept",
                               r.metrics.compression.measured_mass_kept_sum /
                                   static_cast<double>(r.metrics.compression.measured_mass_runs)},
                              {"passes", r.metrics.compression.measured_mass_runs}}
             : nlohmann::json(nullptr)},
        {"modeled_quality",
         r.metrics.compression.quality_modeled
             ? nlohmann::json{{"output_error", r.metrics.compression.modeled_output_error},
                              {"mass_kept", r.metrics.compression.modeled_mass_kept},
                              {"needle_recall", r.metrics.compression.modeled_needle_recall}}
             : nlohmann::json(nullptr)}}},
      {"simulated_seconds", r.simulated_seconds},
      {"wall_seconds", r.wall_seconds},
      {"simulated_per_wall", r.wall_seconds > 0 ? r.simulated_seconds / r.wall_seconds : 0},
      {"messages", r.messages},
      {"messages_per_second", r.wall_seconds > 0 ? double(r.messages) / r.wall_seconds : 0},
  };
  if (r.remote.used)
    j["remote"] = {{"where", r.remote.where},
                   {"missing_reads", r.remote.missing_reads},
                   {"corrupted_reads", r.remote.corrupted_reads},
                   {"failed_reads", r.remote.failed_reads},
                   {"failed_writes", r.remote.failed_writes},
                   {"foreign_encoding_reads", r.remote.foreign_encoding_reads}};
  return j;
}

std::string report_table(const nlohmann::json& j) {
  std::string out;
  auto line = [&](std::string_view label, const std::string& value) {
    out += fmt::format("  {:<28} {}\n", label, value);
  };
  auto pct = [&](const nlohmann::json& p) {
    return fmt::format("p50 {:>10.1f}   p90 {:>10.1f}   p99 {:>10.1f}", p["p50"].get<double>(), p["p90"].get<double>(),
                       p["p99"].get<double>());
  };
  bool real = j.value("backend", std::string("sim")) == "real";
  out += fmt::format("kvtier {}: {} on {}, trace {}\n", real ? "run (real backend)" : "simulation",
                     j["model"].get<std::string>(), j["hardware"].get<std::string>(), j["trace"].get<std::string>());
  if (j.contains("compute"))
    line("compute", j["compute"].get<std::string>());
  line("requests completed",
       fmt::format("{} of {} ({} rejected: larger than the cache can serve)", j["requests_completed"].get<uint64_t>(),
                   j["requests_total"].get<uint64_t>(), j["requests_rejected"].get<uint64_t>()));
  for (const auto& why : j.value("rejections", nlohmann::json::array()))
    line("  rejected", why.get<std::string>());
  line("TTFT ms", pct(j["ttft_ms"]));
  line("TPOT ms", pct(j["tpot_ms"]));
  line("end-to-end ms", pct(j["e2e_ms"]));
  line("tokens per second",
       fmt::format("{:.0f} (mean batch {:.1f}, GPU busy {:.0f}%)", j["tokens_per_second"].get<double>(),
                   j["mean_batch"].get<double>(), 100 * j["gpu_busy"].get<double>()));
  const auto& h = j["prefix_hits_by_tier"];
  // The lowest tier is the NVMe tier, or the remote tier in its place (JSON keeps the "nvme" keys).
  std::string lowest = j.value("lowest_tier", std::string("nvme"));
  line("prefix hit ratio",
       fmt::format("{:.4f}  (hbm {:.4f}, dram {:.4f}, {} {:.4f}, miss {:.4f})", j["prefix_hit_ratio"].get<double>(),
                   h["hbm"].get<double>(), h["dram"].get<double>(), lowest, h["nvme"].get<double>(),
                   h["miss"].get<double>()));
  for (auto name : {"pcie_h2d", "pcie_d2h", "nvme_read", "nvme_write"}) {
    const auto& l = j["links"][name];
    std::string label = name;
    if (lowest != "nvme" && label.starts_with("nvme_"))
      label = lowest + label.substr(4);
    std::string quantized;
    if (l.value("kv_bytes", uint64_t{0}) > l["bytes"].get<uint64_t>())
      quantized = fmt::format("; quantized: {} of KV, {:.2f} GB/s of KV while busy ({:.2f}x the limit)",
                              format_bytes(l["kv_bytes"].get<uint64_t>()), l["kv_busy_gbps"].get<double>(),
                              l["kv_busy_gbps"].get<double>() / std::max(l["limit_gbps"].get<double>(), 1e-9));
    std::string on_link;
    if (l.value("link_gbps", 0.0) > 0)
      on_link = fmt::format("; on the link (GPU-timed) {:.2f} GB/s, {:.1f}% of the limit", l["link_gbps"].get<double>(),
                            100 * l["link_gbps"].get<double>() / std::max(l["limit_gbps"].get<double>(), 1e-9));
    line(fmt::format("link {}", label),
         fmt::format("{:>12}  avg {:6.2f} GB/s, {:6.2f} GB/s while busy, limit {:.1f} GB/s, busy {:.1f}%{}{}",
                     format_bytes(l["bytes"].get<uint64_t>()), l["gbps"].get<double>(), l["busy_gbps"].get<double>(),
                     l["limit_gbps"].get<double>(), 100 * l["utilization"].get<double>(), quantized, on_link));
    if (auto st = j.value("streaming", nlohmann::json::object());
        std::string_view(name) == "pcie_h2d" && st.value("streamed_blocks", uint64_t{0}) > 0)
      line("  streamed pcie_h2d",
           fmt::format("{} in {} blocks read from DRAM by {} steps ({} blocks spilled there)",
                       format_bytes(st["streamed_bytes"].get<uint64_t>()), st["streamed_blocks"].get<uint64_t>(),
                       st["streamed_steps"].get<uint64_t>(), st["spilled_blocks"].get<uint64_t>()));
    if (!l.contains("dma_runs") || l["dma_runs"]["batches"].get<uint64_t>() == 0)
      continue;
    const auto& runs = l["dma_runs"];
    std::string demotions;
    if (runs["demotion_batches"].get<uint64_t>() > 0)
      demotions =
          fmt::format("; demotion batches: {:.2f} runs each, {:.1f} blocks per run",
                      runs["runs_per_demotion_batch"].get<double>(), runs["demotion_blocks_per_run"].get<double>());
    line(fmt::format("  runs {}", label),
         fmt::format("{:.1f} blocks per run, {:.2f} runs per batch ({} batches){}",
                     runs["blocks_per_run"].get<double>(), runs["runs_per_batch"].get<double>(),
                     runs["batches"].get<uint64_t>(), demotions));
  }
  bool remote = j.contains("remote");
  if (remote) {
    const auto& m = j["remote"];
    line("remote tier",
         fmt::format("{} in the NVMe tier's place: {} block writes, {} block reads; misses: {} missing, {} damaged, {} "
                     "unreachable, {} in another encoding; {} writes failed; {} blocks found at start",
                     m["where"].get<std::string>(), j["links"]["nvme_write"]["operations"].get<uint64_t>(),
                     j["links"]["nvme_read"]["operations"].get<uint64_t>(), m["missing_reads"].get<uint64_t>(),
                     m["corrupted_reads"].get<uint64_t>(), m["failed_reads"].get<uint64_t>(),
                     m["foreign_encoding_reads"].get<uint64_t>(), m["failed_writes"].get<uint64_t>(),
                     j["nvme_recovered_blocks"].get<uint64_t>()));
  } else if (auto recovered = j.value("nvme_recovered_blocks", uint64_t{0}); recovered > 0)
    line("nvme recovered",
         fmt::format("{} blocks an earlier run left in the NVMe tier, found by prefix lookup", recovered));
  line("preemptions",
       fmt::format("{} swap, {} recompute ({} tokens recomputed)", j["preemptions"]["swap"].get<uint64_t>(),
                   j["preemptions"]["recompute"].get<uint64_t>(), j["recomputed_tokens"].get<uint64_t>()));
  for (auto name : {"hbm", "dram", "nvme"}) {
    const auto& t = j["tiers"][name];
    if (t["capacity_blocks"].get<uint64_t>() == 0)
      continue;
    line(fmt::format("tier {}", std::string_view(name) == "nvme" ? lowest : name),
         fmt::format(
             "peak {:.1f}% in use, {:.1f}% cached of {} blocks, {} evictions ({} lost), {} demoted, {} promoted",
             100 * t["peak_occupancy"].get<double>(), 100 * t["peak_cached_share"].get<double>(),
             t["capacity_blocks"].get<uint64_t>(), t["evictions"].get<uint64_t>(), t["evictions_lost"].get<uint64_t>(),
             t["demotions"].get<uint64_t>(), t["promotions"].get<uint64_t>()) +
             (t["copies_dropped"].get<uint64_t>() > 0
                  ? fmt::format(", {} copies dropped (moved up)", t["copies_dropped"].get<uint64_t>())
                  : std::string()));
  }
  const auto& c = j["compression"];
  if (c["policy"] != "none" || c["offload_dtype"] != "none") {
    std::string quality;
    if (!c["measured_quality"].is_null())
      quality = fmt::format("; measured on the model's attention: {:.3f} of the last prompt query's mass kept "
                            "(mean of {} passes)",
                            c["measured_quality"]["mass_kept"].get<double>(),
                            c["measured_quality"]["passes"].get<uint64_t>());
    else if (!c["modeled_quality"].is_null())
      quality = fmt::format("; modeled on synthetic attention: output error {:.3f}, needle recall {:.2f}",
                            c["modeled_quality"]["output_error"].get<double>(),
                            c["modeled_quality"]["needle_recall"].get<double>());
    line("compression",
         fmt::format("{} keep {:.2f}: {} runs, {} tokens in {} blocks dropped ({} freed, the rest shared); offload "
                     "{} ({} per block){}",
                     c["policy"].get<std::string>(), c["keep_ratio"].get<double>(), c["runs"].get<uint64_t>(),
                     c["tokens_dropped"].get<uint64_t>(), c["blocks_dropped"].get<uint64_t>(),
                     c["blocks_freed"].get<uint64_t>(), c["offload_dtype"].get<std::string>(),
                     format_bytes(c["offload_bytes_per_block"].get<uint64_t>()), quality));
  }
  const auto& f = j["fragmentation"];
  line("fragmentation",
       fmt::format("{:.0f} unused token slots in partial blocks on average ({:.2f}% of used), peak {}",
                   f["mean_unused_tokens"].get<double>(), 100 * f["mean_share_of_used"].get<double>(),
                   f["peak_unused_tokens"].get<uint64_t>()));
  if (real)
    line("ran", fmt::format("{:.1f} s of wall time", j["wall_seconds"].get<double>()));
  else
    line("simulated",
         fmt::format("{:.1f} s in {:.2f} s wall ({:.0f}x real time, {:.2f} M messages/s)",
                     j["simulated_seconds"].get<double>(), j["wall_seconds"].get<double>(),
                     j["simulated_per_wall"].get<double>(), j["messages_per_second"].get<double>() / 1e6));
  return out;
}

std::string steps_csv(const run_result& r) {
  std::string out = "time_s,batch,prefill_tokens,decode_tokens,waiting,hbm_used_blocks,dram_used_blocks,step_s\n";
  for (const auto& s : r.metrics.steps)
    out += fmt::format("{:.6f},{},{},{},{},{},{},{:.6f}\n", s.time_s, s.batch, s.prefill_tokens, s.decode_tokens,
                       s.waiting, s.hbm_used, s.dram_used, s.step_s);
  return out;
}

nlohmann::json chrome_trace(const run_result& r) {
  static constexpr const char* lanes[] = {"GPU compute", "PCIe H2D", "PCIe D2H", "NVMe read", "NVMe write"};
  auto events = nlohmann::json::array();
  for (int i = 0; i < 5; ++i)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", i}, {"args", {{"name", lanes[i]}}}});
  for (const auto& e : r.timeline) {
    auto lane = static_cast<int>(e.where);
    bool compute = e.where == timeline_event::lane::compute;
    events.push_back({{"name", compute ? fmt::format("step {} seqs", e.count) : fmt::format("{} blocks", e.count)},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", lane},
                      {"ts", e.start_s * 1e6},
                      {"dur", (e.end_s - e.start_s) * 1e6},
                      {"args", compute ? nlohmann::json{{"tokens", e.bytes}} : nlohmann::json{{"bytes", e.bytes}}}});
  }
  return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

} // namespace kvtier
