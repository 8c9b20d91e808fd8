#include "sim/trace.hpp"

#include "runtime/block_hash.hpp"
#include "runtime/error.hpp"
#include "sim/line_source.hpp"
#include "sim/trace_builder.hpp"

#include <kvtier/build_info.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

namespace kvtier::sim {

const char* to_string(trace_format fmt) {
  switch (fmt) {
    case trace_format::auto_detect:
      return "auto";
    case trace_format::mooncake:
      return "mooncake";
    case trace_format::azure:
      return "azure";
    case trace_format::burstgpt:
      return "burstgpt";
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

namespace {

// Detects the format from the first non-blank line of `lines` (by `name`'s
// extension first) and puts that line back for the reader.
caf::expected<trace_format> detect_format(detail::line_source& lines, const std::string& name) {
  if (name.ends_with(".jsonl") || name.ends_with(".json"))
    return trace_format::mooncake;
  auto line = lines.next();
  while (line && line->find_first_not_of(" \t") == std::string_view::npos)
    line = lines.next();
  if (!line) {
    if (auto err = lines.error())
      return err;
    return make_error(errc::invalid_trace, fmt::format("{}: the trace has no requests (empty file)", name));
  }
  lines.unread();
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

caf::error check_options(const trace_read_options& options) {
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale))
    return make_error(errc::invalid_argument,
                      fmt::format("trace time_scale: expected a positive number, got {}", options.time_scale));
  if (options.block_tokens == 0)
    return make_error(errc::invalid_argument, "trace block_tokens: expected a positive integer, got 0");
  return {};
}

caf::expected<trace> parse_lines(detail::line_source& lines, const std::string& name, trace_format fmt,
                                 const trace_read_options& options) {
  if (auto err = check_options(options))
    return err;
  if (fmt == trace_format::auto_detect) {
    auto detected = detect_format(lines, name);
    if (!detected)
      return detected.error();
    fmt = *detected;
  }
  caf::expected<trace> result = make_error(errc::invalid_argument, "unknown trace format");
  switch (fmt) {
    case trace_format::mooncake:
      result = detail::parse_mooncake(lines, name, options);
      break;
    case trace_format::azure:
      result = detail::parse_azure(lines, name, options);
      break;
    case trace_format::burstgpt:
      result = detail::parse_burstgpt(lines, name, options);
      break;
    case trace_format::auto_detect:
      break;
  }
  // A read that failed ended the lines early: that, not "no requests", is the news.
  if (auto err = lines.error())
    return err;
  return result;
}

} // namespace

caf::expected<trace_format> detect_trace_format(std::string_view text, const std::string& name) {
  detail::line_cursor lines(text);
  return detect_format(lines, name);
}

caf::expected<trace> parse_trace(std::string_view text, const std::string& name, trace_format fmt,
                                 const trace_read_options& options) {
  detail::line_cursor lines(text);
  return parse_lines(lines, name, fmt, options);
}

caf::expected<trace> read_trace(const std::string& path, trace_format fmt, const trace_read_options& options) {
  if (auto err = check_options(options))
    return err;
  detail::file_lines lines(path);
  if (auto err = lines.error())
    return err;
  return parse_lines(lines, path, fmt, options);
}

caf::expected<trace> read_default_trace(trace_format fmt, const trace_read_options& options) {
  if (const char* dir = std::getenv("KVTIER_DATA_DIR"); dir && *dir)
    return read_trace(default_trace_path(), fmt, options);
  return parse_trace(bundled_trace_text(), bundled_trace_name, fmt, options);
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

std::string default_trace_path() {
  return bundled_trace_dir() + "/mooncake_conversation_trace.jsonl";
}

} // namespace kvtier::sim
