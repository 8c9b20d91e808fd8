// The CSV traces: Azure LLM inference (TIMESTAMP,ContextTokens,GeneratedTokens)
// and BurstGPT (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type).
// Neither quotes fields; both start with a header line.

#include "sim/trace_builder.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <span>
#include <strings.h>

namespace kvtier::sim::detail {
namespace {

constexpr uint64_t max_tokens = std::numeric_limits<uint32_t>::max();

bool same_header(std::span<const std::string_view> fields, std::span<const std::string_view> expected) {
  if (fields.size() != expected.size())
    return false;
  for (size_t i = 0; i < fields.size(); ++i)
    if (fields[i].size() != expected[i].size() ||
        strncasecmp(fields[i].data(), expected[i].data(), fields[i].size()) != 0)
      return false;
  return true;
}

std::string joined(std::span<const std::string_view> names) {
  std::string out;
  for (auto n : names)
    out += (out.empty() ? "" : ",") + std::string(n);
  return out;
}

// Reads the header line; returns an error, or {} with `lines` past the header.
caf::error read_header(line_source& lines, const std::string& name, std::span<const std::string_view> columns) {
  auto line = lines.next();
  while (line && line->find_first_not_of(" \t") == std::string_view::npos)
    line = lines.next();
  if (!line)
    return make_error(errc::invalid_trace, fmt::format("{}: the trace has no requests (empty file)", name));
  auto fields = split_csv(*line);
  if (!same_header(fields, columns))
    return make_error(
        errc::invalid_trace,
        fmt::format("{}:{}: expected the header {}, got {}", name, lines.number(), joined(columns), quote(*line)));
  return {};
}

std::string token_error(std::string_view column, std::string_view field) {
  if (parse_uint(field, std::numeric_limits<uint64_t>::max()))
    return fmt::format("{}: {} is too large (at most {})", column, field, max_tokens);
  return fmt::format("{}: expected a non-negative integer, got {}", column, quote(field));
}

} // namespace

caf::expected<trace> parse_azure(line_source& lines, const std::string& name, const trace_read_options& options) {
  static constexpr std::string_view columns[] = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"};
  trace_builder builder(name, options);
  if (auto err = read_header(lines, name, columns))
    return err;
  while (auto line = lines.next()) {
    if (line->find_first_not_of(" \t") == std::string_view::npos)
      continue;
    auto fields = split_csv(*line);
    std::string what;
    auto time = parse_timestamp_ns(fields[0]);
    std::optional<uint64_t> input, output;
    if (fields.size() != 3) {
      what = fmt::format("expected 3 columns ({}), got {}", joined(columns), fields.size());
    } else if (!time) {
      what = fmt::format("TIMESTAMP: expected a time like 2023-11-16 18:17:03.9799600, got {}", quote(fields[0]));
    } else if (!(input = parse_uint(fields[1], max_tokens))) {
      what = token_error(columns[1], fields[1]);
    } else if (!(output = parse_uint(fields[2], max_tokens))) {
      what = token_error(columns[2], fields[2]);
    }
    if (!what.empty()) {
      if (auto err = builder.bad_row(lines.number(), what))
        return err;
      continue;
    }
    trace_request request;
    request.input_tokens = static_cast<uint32_t>(*input);
    request.output_tokens = static_cast<uint32_t>(*output);
    if (!builder.add(lines.number(), *time, std::move(request)))
      break;
  }
  return builder.finish();
}

caf::expected<trace> parse_burstgpt(line_source& lines, const std::string& name, const trace_read_options& options) {
  static constexpr std::string_view columns[] = {"Timestamp",       "Model",        "Request tokens",
                                                 "Response tokens", "Total tokens", "Log Type"};
  trace_builder builder(name, options);
  if (auto err = read_header(lines, name, columns))
    return err;
  // Seconds; at most 2^62 ns, about 146 years.
  constexpr double max_s = static_cast<double>(max_raw_ns) / 1e9;
  while (auto line = lines.next()) {
    if (line->find_first_not_of(" \t") == std::string_view::npos)
      continue;
    auto fields = split_csv(*line);
    std::string what;
    std::optional<double> time;
    std::optional<uint64_t> input, output, total;
    if (fields.size() != 6) {
      what = fmt::format("expected 6 columns ({}), got {}", joined(columns), fields.size());
    } else if (!(time = parse_double(fields[0])) || *time < 0 || *time > max_s) {
      what = fmt::format("Timestamp: expected non-negative seconds, got {}", quote(fields[0]));
    } else if (fields[1].empty()) {
      what = "Model: expected a model name, got an empty field";
    } else if (!(input = parse_uint(fields[2], max_tokens))) {
      what = token_error(columns[2], fields[2]);
    } else if (!(output = parse_uint(fields[3], max_tokens))) {
      what = token_error(columns[3], fields[3]);
    } else if (!(total = parse_uint(fields[4], std::numeric_limits<uint64_t>::max()))) {
      what = token_error(columns[4], fields[4]);
    } else if (fields[5].empty()) {
      what = "Log Type: expected a log type such as \"Conversation log\", got an empty field";
    }
    if (!what.empty()) {
      if (auto err = builder.bad_row(lines.number(), what))
        return err;
      continue;
    }
    trace_request request;
    request.input_tokens = static_cast<uint32_t>(*input);
    request.output_tokens = static_cast<uint32_t>(*output);
    if (*output == 0)
      builder.count_failed(); // BurstGPT logs failed requests with no response; kept, counted
    // *time <= max_s keeps the product inside int64.
    if (!builder.add(lines.number(), std::llround(*time * 1e9), std::move(request)))
      break;
  }
  return builder.finish();
}

} // namespace kvtier::sim::detail
