#include "sim/trace.hpp"

#include "runtime/block_hash.hpp"
#include "runtime/error.hpp"
#include "sim/trace_builder.hpp"

#include <kvtier/build_info.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_set>

namespace kvtier::sim {

const char* to_string(trace_format fmt) {
  switch (fmt) {
    case trace_format::auto_detect: return "auto";
    case trace_format::mooncake: return "mooncake";
    case trace_format::azure: return "azure";
    case trace_format::burstgpt: return "burstgpt";
  }
  return "unknown";
}

caf::expected<trace_format> parse_trace_format(std::string_view text) {
  for (auto fmt : {trace_format::auto_detect, trace_format::mooncake, trace_format::azure, trace_format::burstgpt})
    if (text == to_string(fmt))
      return fmt;
  return make_error(errc::invalid_argument,
                    fmt::format("unknown trace format \"{}\": expected auto, mooncake, azure or burstgpt", text));
}

caf::expected<trace_format> detect_trace_format(std::string_view text, const std::string& name) {
  if (name.ends_with(".jsonl") || name.ends_with(".json"))
    return trace_format::mooncake;
  detail::line_cursor lines(text);
  auto line = lines.next();
  while (line && line->find_first_not_of(" \t") == std::string_view::npos)
    line = lines.next();
  if (!line)
    return make_error(errc::invalid_trace, fmt::format("{}: the trace has no requests (empty file)", name));
  auto first = line->substr(line->find_first_not_of(" \t"));
  if (first.starts_with('{'))
    return trace_format::mooncake;
  auto fields = detail::split_csv(first);
  auto is = [&](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
             return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
  };
  if (fields.size() == 3 && is(fields[0], "TIMESTAMP") && is(fields[1], "ContextTokens"))
    return trace_format::azure;
  if (fields.size() == 6 && is(fields[0], "Timestamp") && is(fields[1], "Model"))
    return trace_format::burstgpt;
  return make_error(errc::invalid_trace,
                    fmt::format("{}:{}: cannot tell the trace format from {}: expected a Mooncake JSON object, the "
                                "Azure header TIMESTAMP,ContextTokens,GeneratedTokens or the BurstGPT header "
                                "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type",
                                name, lines.number(), detail::quote(first)));
}

caf::expected<trace> parse_trace(std::string_view text, const std::string& name, trace_format fmt,
                                 const trace_read_options& options) {
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale))
    return make_error(errc::invalid_argument,
                      fmt::format("trace time_scale: expected a positive number, got {}", options.time_scale));
  if (options.block_tokens == 0)
    return make_error(errc::invalid_argument, "trace block_tokens: expected a positive integer, got 0");
  if (fmt == trace_format::auto_detect) {
    auto detected = detect_trace_format(text, name);
    if (!detected)
      return detected.error();
    fmt = *detected;
  }
  switch (fmt) {
    case trace_format::mooncake: return detail::parse_mooncake(text, name, options);
    case trace_format::azure: return detail::parse_azure(text, name, options);
    case trace_format::burstgpt: return detail::parse_burstgpt(text, name, options);
    case trace_format::auto_detect: break;
  }
  return make_error(errc::invalid_argument, "unknown trace format");
}

caf::expected<trace> read_trace(const std::string& path, trace_format fmt, const trace_read_options& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return make_error(errc::io_failure, fmt::format("{}: cannot open trace: {}", path, std::strerror(errno)));
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad())
    return make_error(errc::io_failure, fmt::format("{}: cannot read trace", path));
  return parse_trace(text, path, fmt, options);
}

// ---------------------------------------------------------------------------
// statistics

namespace {

// Linear interpolation between order statistics (numpy's default percentile).
double percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty())
    return 0;
  double at = p * static_cast<double>(sorted.size() - 1);
  auto below = static_cast<size_t>(at);
  size_t above = std::min(below + 1, sorted.size() - 1);
  double fraction = at - static_cast<double>(below);
  return static_cast<double>(sorted[below]) +
         (static_cast<double>(sorted[above]) - static_cast<double>(sorted[below])) * fraction;
}

value_stats summarize(std::vector<uint64_t> values) {
  value_stats s;
  if (values.empty())
    return s;
  std::sort(values.begin(), values.end());
  for (auto v : values)
    s.total += v;
  s.mean = static_cast<double>(s.total) / static_cast<double>(values.size());
  s.p50 = percentile(values, 0.50);
  s.p99 = percentile(values, 0.99);
  s.min = values.front();
  s.max = values.back();
  return s;
}

struct pair_hash {
  size_t operator()(const std::pair<uint64_t, uint64_t>& p) const noexcept {
    return std::hash<uint64_t>{}(p.first * 0x9E3779B97F4A7C15ull ^ p.second);
  }
};

} // namespace

trace_stats compute_stats(const std::vector<trace_request>& requests) {
  trace_stats s;
  s.requests = requests.size();
  if (requests.empty())
    return s;
  std::vector<uint64_t> input, output;
  input.reserve(requests.size());
  output.reserve(requests.size());
  double first = requests.front().arrival_s, last = first;
  std::unordered_set<std::pair<uint64_t, uint64_t>, pair_hash> blocks;
  std::unordered_set<uint64_t> sessions, tenants;
  for (const auto& r : requests) {
    input.push_back(r.input_tokens);
    output.push_back(r.output_tokens);
    first = std::min(first, r.arrival_s);
    last = std::max(last, r.arrival_s);
    s.blocks += r.block_ids.size();
    for (auto id : r.block_ids)
      blocks.insert({r.tenant, id});
    if (r.session != 0)
      sessions.insert(r.session);
    tenants.insert(r.tenant);
  }
  s.duration_s = last - first;
  s.rate_per_s = s.duration_s > 0 ? static_cast<double>(s.requests) / s.duration_s : 0;
  s.input_tokens = summarize(std::move(input));
  s.output_tokens = summarize(std::move(output));
  s.distinct_blocks = blocks.size();
  s.sessions = sessions.size();
  s.tenants = tenants.size();
  return s;
}

prefix_reuse ideal_prefix_reuse(const trace& t) {
  prefix_reuse out;
  std::unordered_set<block_hash> seen;
  seen.reserve(t.stats.blocks ? t.stats.blocks : 1024);
  for (const auto& r : t.requests) {
    out.input_tokens += r.input_tokens;
    block_hash parent{};
    for (size_t i = 0; i < r.block_ids.size(); ++i) {
      parent = hash_external_block(parent, r.block_ids[i], tenant_salt{r.tenant});
      ++out.blocks;
      if (!seen.insert(parent).second) {
        ++out.hit_blocks;
        uint64_t start = uint64_t{i} * r.block_tokens;
        if (start < r.input_tokens)
          out.hit_tokens += std::min<uint64_t>(r.block_tokens, r.input_tokens - start);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// bundled traces

std::string bundled_trace_dir() {
  if (const char* dir = std::getenv("KVTIER_DATA_DIR"); dir && *dir)
    return dir;
  return std::string(build_info::source_dir) + "/sim/traces";
}

std::string default_trace_path() { return bundled_trace_dir() + "/mooncake_conversation_trace.jsonl"; }

} // namespace kvtier::sim
