#include "sim/cluster_report.hpp"

#include "runtime/config_names.hpp"

#include <fmt/format.h>

#include <array>

namespace kvtier::sim {
namespace {

std::string_view role_name(replica_role r) {
  switch (r) {
    case replica_role::both:
      return "both";
    case replica_role::prefill:
      return "prefill";
    case replica_role::decode:
      return "decode";
  }
  return "?";
}

nlohmann::json ms(const percentiles& p) {
  return {{"p50", p.p50 * 1e3}, {"p90", p.p90 * 1e3}, {"p99", p.p99 * 1e3}};
}

nlohmann::json link_json(const link_report& l, double seconds) {
  return {{"bytes", l.bytes},
          {"operations", l.operations},
          {"gbps", seconds > 0 ? static_cast<double>(l.bytes) / seconds / 1e9 : 0},
          {"limit_gbps", l.limit_gbps},
          {"utilization", seconds > 0 ? l.busy_seconds / seconds : 0}};
}

double ratio(uint64_t part, uint64_t whole) {
  return whole ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

} // namespace

nlohmann::json cluster_json(const config& cfg, const cluster_result& r, const run_labels& labels) {
  const double T = r.simulated_seconds;
  // Prefix hits over the replicas that take prompts: a decode replica's
  // prompt came with the request, it is no lookup of the cluster's.
  uint64_t looked_up = 0, missed = 0, remote = 0, generated = 0, nic_bytes = 0;
  std::array<uint64_t, tier_count> hits{};
  nlohmann::json replicas = nlohmann::json::array();
  for (size_t i = 0; i < r.replicas.size(); ++i) {
    const auto& m = r.replicas[i].metrics;
    generated += m.scheduler.decode_tokens;
    nic_bytes += r.nic_out[i].bytes;
    if (r.roles[i] != replica_role::decode) {
      looked_up += m.blocks.prompt_blocks;
      missed += m.blocks.miss_blocks;
      remote += m.scheduler.supplied_blocks;
      for (auto t : all_tiers)
        hits[index_of(t)] += m.blocks.tiers[index_of(t)].prefix_hit_blocks;
    }
    replicas.push_back({{"replica", i},
                        {"role", role_name(r.roles[i])},
                        {"routed", r.routed[i]},
                        {"supplied_tokens", m.scheduler.supplied_tokens},
                        {"nic_in", link_json(r.nic_in[i], T)},
                        {"nic_out", link_json(r.nic_out[i], T)},
                        {"report", report_json(cfg, r.replicas[i], labels)}});
  }
  uint64_t local_hits = hits[0] + hits[1] + hits[2];
  nlohmann::json by_tier = nlohmann::json::object();
  for (auto t : all_tiers)
    by_tier[std::string(name_of(t))] = ratio(hits[index_of(t)], looked_up);
  by_tier["remote"] = ratio(remote, looked_up);
  by_tier["miss"] = ratio(missed > remote ? missed - remote : 0, looked_up);
  const auto& k = cfg.cluster;
  return {
      {"config", labels.config},
      {"trace", labels.trace},
      {"model", cfg.geometry.model.name},
      {"hardware", cfg.hardware.name},
      {"replicas", k.replicas},
      {"router", std::string(name_of(k.router))},
      {"prefill_replicas", k.prefill},
      {"decode_replicas", k.decode},
      {"requests_total", r.requests_total},
      {"requests_completed", r.requests_completed},
      {"requests_rejected", requests_rejected(r)},
      {"ttft_ms", ms(percentiles_of(r.ttft_s))},
      {"tpot_ms", ms(percentiles_of(r.tpot_s))},
      {"e2e_ms", ms(percentiles_of(r.e2e_s))},
      {"generated_tokens_per_second", T > 0 ? static_cast<double>(generated + r.requests_completed) / T : 0},
      {"prefix_blocks_looked_up", looked_up},
      {"prefix_hit_ratio", ratio(local_hits + remote, looked_up)},
      {"prefix_hits_by_tier", by_tier},
      {"remote_tier",
       {{"capacity_blocks", r.remote_capacity_blocks},
        {"fetched_blocks", r.remote_fetched_blocks},
        {"stored_blocks", r.remote_stored_blocks},
        {"evictions", r.remote_evictions},
        {"read", link_json(r.remote_read, T)},
        {"write", link_json(r.remote_write, T)}}},
      {"handoff", {{"blocks", r.handoff_blocks}, {"bytes", r.handoff_bytes}}},
      {"network", {{"nic_bytes", nic_bytes}, {"gbps", T > 0 ? static_cast<double>(nic_bytes) / T / 1e9 : 0}}},
      {"simulated_seconds", T},
      {"wall_seconds", r.wall_seconds},
      {"speedup", r.wall_seconds > 0 ? T / r.wall_seconds : 0},
      {"messages", r.messages},
      {"threads", r.threads},
      {"per_replica", replicas},
  };
}

std::string cluster_table(const nlohmann::json& j) {
  std::string t;
  auto pct = [&](const char* what, const nlohmann::json& p) {
    t += fmt::format("  {:<28} p50 {:>10.1f}   p90 {:>10.1f}   p99 {:>10.1f}\n", what, p["p50"].get<double>(),
                     p["p90"].get<double>(), p["p99"].get<double>());
  };
  t += fmt::format("kvtier cluster simulation: {} x {} on {}, router {}{}, trace {}\n", j["replicas"].get<uint32_t>(),
                   j["model"].get<std::string>(), j["hardware"].get<std::string>(), j["router"].get<std::string>(),
                   j["prefill_replicas"].get<uint32_t>() > 0
                       ? fmt::format(" (prefill {}, decode {})", j["prefill_replicas"].get<uint32_t>(),
                                     j["decode_replicas"].get<uint32_t>())
                       : "",
                   j["trace"].get<std::string>());
  t += fmt::format("  {:<28} {} of {}\n", "requests completed", j["requests_completed"].get<uint64_t>(),
                   j["requests_total"].get<uint64_t>());
  pct("TTFT ms", j["ttft_ms"]);
  pct("TPOT ms", j["tpot_ms"]);
  pct("end to end ms", j["e2e_ms"]);
  t += fmt::format("  {:<28} {:.0f}\n", "generated tokens per second", j["generated_tokens_per_second"].get<double>());
  const auto& h = j["prefix_hits_by_tier"];
  t +=
      fmt::format("  {:<28} {:.4f}  (hbm {:.4f}, dram {:.4f}, nvme {:.4f}, remote {:.4f}, miss {:.4f})\n",
                  "prefix hit ratio", j["prefix_hit_ratio"].get<double>(), h["hbm"].get<double>(),
                  h["dram"].get<double>(), h["nvme"].get<double>(), h["remote"].get<double>(), h["miss"].get<double>());
  const auto& rt = j["remote_tier"];
  if (rt["capacity_blocks"].get<uint64_t>() > 0)
    t += fmt::format("  {:<28} {} blocks: {} stored, {} fetched, {} evicted; read {:.2f} GB/s, write {:.2f} GB/s\n",
                     "remote tier", rt["capacity_blocks"].get<uint64_t>(), rt["stored_blocks"].get<uint64_t>(),
                     rt["fetched_blocks"].get<uint64_t>(), rt["evictions"].get<uint64_t>(),
                     rt["read"]["gbps"].get<double>(), rt["write"]["gbps"].get<double>());
  if (j["handoff"]["blocks"].get<uint64_t>() > 0)
    t += fmt::format("  {:<28} {} blocks, {:.2f} TB\n", "prefill to decode handoff",
                     j["handoff"]["blocks"].get<uint64_t>(), j["handoff"]["bytes"].get<uint64_t>() / 1e12);
  t += fmt::format("  {:<28} {:.2f} TB sent, {:.2f} GB/s cluster-wide\n", "network",
                   j["network"]["nic_bytes"].get<uint64_t>() / 1e12, j["network"]["gbps"].get<double>());
  t += fmt::format("  {:<8} {:<8} {:>7} {:>9} {:>8} {:>9} {:>9} {:>6} {:>10} {:>10}\n", "replica", "role", "routed",
                   "completed", "hit", "TTFT p50", "TPOT p50", "busy", "NIC in GB", "NIC out GB");
  for (const auto& r : j["per_replica"]) {
    const auto& rep = r["report"];
    t += fmt::format("  {:<8} {:<8} {:>7} {:>9} {:>8.4f} {:>9.1f} {:>9.1f} {:>5.0f}% {:>10.1f} {:>10.1f}\n",
                     r["replica"].get<uint32_t>(), r["role"].get<std::string>(), r["routed"].get<uint64_t>(),
                     rep["requests_completed"].get<uint64_t>(), rep["prefix_hit_ratio"].get<double>(),
                     rep["ttft_ms"]["p50"].get<double>(), rep["tpot_ms"]["p50"].get<double>(),
                     rep["gpu_busy"].get<double>() * 100, r["nic_in"]["bytes"].get<uint64_t>() / 1e9,
                     r["nic_out"]["bytes"].get<uint64_t>() / 1e9);
  }
  double sim_s = j["simulated_seconds"].get<double>(), wall = j["wall_seconds"].get<double>();
  t += fmt::format("  {:<28} {:.1f} s in {:.2f} s wall ({:.0f}x real time, {:.2f} M messages/s, {} threads)\n",
                   "simulated", sim_s, wall, wall > 0 ? sim_s / wall : 0,
                   wall > 0 ? j["messages"].get<uint64_t>() / wall / 1e6 : 0, j.value("threads", 1u));
  return t;
}

} // namespace kvtier::sim
