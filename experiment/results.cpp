#include "experiment/results.hpp"

#include "runtime/error.hpp"
#include "runtime/text_file.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kvtier::experiment {

const std::vector<metric_column>& metric_columns(run_mode mode, bool cluster) {
  static const std::vector<metric_column> timed{
      {"completed", "/requests_completed"},
      {"rejected", "/requests_rejected"},
      {"ttft_p50_ms", "/ttft_ms/p50"},
      {"ttft_p99_ms", "/ttft_ms/p99"},
      {"tpot_p50_ms", "/tpot_ms/p50"},
      {"tpot_p99_ms", "/tpot_ms/p99"},
      {"tokens_per_s", "/tokens_per_second"},
      {"max_batch", "/max_batch"},
      {"mean_batch", "/mean_batch"},
      {"hit_ratio", "/prefix_hit_ratio"},
      {"hit_hbm", "/prefix_hits_by_tier/hbm"},
      {"hit_dram", "/prefix_hits_by_tier/dram"},
      {"hit_nvme", "/prefix_hits_by_tier/nvme"},
      {"hbm_blocks", "/tiers/hbm/capacity_blocks"},
      {"hbm_peak", "/tiers/hbm/peak_occupancy"},
      {"swaps", "/preemptions/swap"},
      {"recomputes", "/preemptions/recompute"},
      {"recomputed_tokens", "/recomputed_tokens"},
      {"simulated_s", "/simulated_seconds"},
  };
  static const std::vector<metric_column> cache_only{
      {"requests", "/requests_total"},           {"capacity_blocks", "/capacity_blocks"},
      {"hit_ratio", "/prefix_hit_ratio"},        {"lru_hit_ratio", "/lru_hit_ratio"},
      {"belady_hit_ratio", "/belady_hit_ratio"},
  };
  static const std::vector<metric_column> timed_cluster = [] {
    auto columns = timed;
    columns.insert(columns.end(),
                   {
                       {"hit_remote", "/prefix_hits_by_tier/remote"},
                       {"generated_tokens_per_s", "/generated_tokens_per_second"},
                       {"remote_read_gbps", "/remote_tier/read/gbps"},
                       {"network_gbps", "/network/gbps"},
                   });
    return columns;
  }();
  if (mode == run_mode::cache_only)
    return cache_only;
  return cluster ? timed_cluster : timed;
}

bool is_cluster_record(const nlohmann::json& record) {
  return record.value("ok", false) && record.contains("result") && record["result"].contains("per_replica");
}

nlohmann::json record_of(const sweep_point& p, const nlohmann::json& result) {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [k, v] : p.values)
    values[k] = v;
  nlohmann::json j{{"index", p.index}, {"label", p.label}, {"fingerprint", p.fingerprint}, {"values", values}};
  j["seed"] = p.seed ? nlohmann::json(*p.seed) : nlohmann::json(nullptr);
  j["ok"] = true;
  j["result"] = result;
  return j;
}

nlohmann::json failure_record_of(const sweep_point& p, const std::string& error) {
  auto j = record_of(p, nullptr);
  j["ok"] = false;
  j.erase("result");
  j["error"] = error;
  return j;
}

std::string point_file(const std::string& out_dir, const sweep_point& p) {
  return fmt::format("{}/points/{}.json", out_dir, p.fingerprint);
}

caf::error write_atomically(const std::string& path, const std::string& text) {
  auto tmp = fmt::format("{}.tmp.{}", path, getpid());
  if (auto err = write_text_file(tmp, text))
    return err;
  // The data reaches the disk before the name does: after a crash the record is whole or absent.
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::fsync(fd) != 0 || ::close(fd) != 0 || std::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    std::remove(tmp.c_str());
    return make_error(errc::io_failure, fmt::format("cannot write {}: {}", path, std::strerror(e)));
  }
  return {};
}

std::optional<nlohmann::json> read_record(const std::string& out_dir, const sweep_point& p) {
  auto text = read_text_file(point_file(out_dir, p), "point record", errc::io_failure, 64u << 20);
  if (!text)
    return std::nullopt;
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("fingerprint", "") != p.fingerprint || !j.contains("ok"))
    return std::nullopt;
  // Index and label follow the spec as it is now (lists may have been reordered).
  j["index"] = p.index;
  j["label"] = p.label;
  return j;
}

std::string cell(const nlohmann::json& result, const char* pointer) {
  nlohmann::json::json_pointer ptr(pointer);
  if (!result.is_object() || !result.contains(ptr))
    return "";
  const auto& v = result.at(ptr);
  if (v.is_number_integer() || v.is_number_unsigned())
    return v.dump();
  if (v.is_number_float())
    return fmt::format("{:.6g}", v.get<double>());
  return v.is_string() ? v.get<std::string>() : v.dump();
}

nlohmann::json results_json(const experiment_spec& spec, const std::vector<nlohmann::json>& records) {
  auto axes = nlohmann::json::array();
  for (const auto& a : spec.axes)
    axes.push_back({{"key", a.key}, {"values", a.values}});
  return {{"experiment", spec.name},
          {"title", spec.title},
          {"question", spec.question},
          {"mode", spec.mode == run_mode::timed ? "timed" : "cache-only"},
          {"axes", axes},
          {"report_x", spec.report_x},
          {"points", records}};
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos)
    return s;
  std::string out = "\"";
  for (char c : s)
    out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

} // namespace

std::string results_csv(const experiment_spec& spec, const std::vector<nlohmann::json>& records) {
  std::string out = "index,label";
  for (const auto& a : spec.axes)
    out += "," + csv_field(a.key);
  out += ",seed,status";
  const bool cluster = std::any_of(records.begin(), records.end(), is_cluster_record);
  for (const auto& c : metric_columns(spec.mode, cluster))
    out += fmt::format(",{}", c.name);
  out += "\n";
  for (const auto& r : records) {
    out += fmt::format("{},{}", r["index"].get<uint32_t>(), csv_field(r["label"].get<std::string>()));
    for (const auto& a : spec.axes)
      out += "," + csv_field(r["values"].value(a.key, ""));
    out += "," + (r["seed"].is_null() ? std::string() : r["seed"].dump());
    bool ok = r["ok"].get<bool>();
    out += ok ? ",ok" : ",failed";
    for (const auto& c : metric_columns(spec.mode, cluster))
      out += "," + (ok ? cell(r["result"], c.pointer) : std::string());
    out += "\n";
  }
  return out;
}

} // namespace kvtier::experiment
