// Mooncake JSONL: one request a line,
//   {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [id, ...]}
// hash_ids are chained prefix hashes of `block_tokens`-token blocks (512 in
// the published traces). Other keys are ignored; hash_ids may be absent.

#include "sim/trace_builder.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace kvtier::sim::detail {
namespace {

using json = nlohmann::json;

std::string show(const json& value) {
  auto text = value.dump();
  constexpr size_t limit = 40;
  if (text.size() > limit)
    text = text.substr(0, limit) + "...";
  return text;
}

// Reads one row into `out`; returns what was wrong, or an empty string.
std::string read_row(std::string_view line, uint32_t block_tokens, int64_t& raw_ns, trace_request& out) {
  json row;
  try {
    row = json::parse(line);
  } catch (const json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
    std::string_view what = e.what();
    if (auto colon = what.find(": "); colon != std::string_view::npos && what.starts_with("[json.exception"))
      what.remove_prefix(colon + 2);
    return fmt::format("invalid JSON at column {}: {}", e.byte, what);
  } catch (const json::exception& e) {
    // e.g. "[json.exception.out_of_range.406] number overflow parsing '1e400'"
    std::string_view what = e.what();
    if (auto close = what.find("] "); close != std::string_view::npos && what.starts_with("[json.exception"))
      what.remove_prefix(close + 2);
    return fmt::format("invalid JSON: {}", what);
  }
  if (!row.is_object())
    return fmt::format("expected a JSON object, got {}", show(row));

  auto field = [&](const char* key) -> const json* {
    auto it = row.find(key);
    return it == row.end() ? nullptr : &*it;
  };
  auto read_count = [&](const char* key, uint32_t& value) -> std::string {
    auto node = field(key);
    if (!node)
      return fmt::format("missing \"{}\"", key);
    if (!node->is_number_unsigned())
      return fmt::format("\"{}\": expected a non-negative integer, got {}", key, show(*node));
    auto v = node->get<uint64_t>();
    if (v > std::numeric_limits<uint32_t>::max())
      return fmt::format("\"{}\": {} is too large (at most {})", key, v, std::numeric_limits<uint32_t>::max());
    value = static_cast<uint32_t>(v);
    return {};
  };

  auto ts = field("timestamp");
  if (!ts)
    return "missing \"timestamp\"";
  // Milliseconds; at most 2^62 ns, about 146 years.
  constexpr double max_ms = static_cast<double>(max_raw_ns) / 1e6;
  if (!ts->is_number() || ts->get<double>() < 0 || !std::isfinite(ts->get<double>()) || ts->get<double>() > max_ms)
    return fmt::format("\"timestamp\": expected non-negative milliseconds, got {}", show(*ts));
  if (ts->is_number_unsigned())
    raw_ns = static_cast<int64_t>(ts->get<uint64_t>()) * 1'000'000;
  else
    raw_ns = std::llround(ts->get<double>() * 1e6);

  if (auto err = read_count("input_length", out.input_tokens); !err.empty())
    return err;
  if (auto err = read_count("output_length", out.output_tokens); !err.empty())
    return err;

  if (auto ids = field("hash_ids")) {
    if (!ids->is_array())
      return fmt::format("\"hash_ids\": expected an array of non-negative integers, got {}", show(*ids));
    uint64_t room = (uint64_t{out.input_tokens} + block_tokens - 1) / block_tokens;
    if (ids->size() > room)
      return fmt::format("\"hash_ids\": {} blocks of {} tokens is more than input_length {} needs ({})", ids->size(),
                         block_tokens, out.input_tokens, room);
    out.block_ids.reserve(ids->size());
    for (size_t i = 0; i < ids->size(); ++i) {
      const auto& id = (*ids)[i];
      if (!id.is_number_unsigned())
        return fmt::format("\"hash_ids\"[{}]: expected a non-negative integer, got {}", i, show(id));
      out.block_ids.push_back(id.get<uint64_t>());
    }
    out.block_tokens = block_tokens;
  }
  return {};
}

} // namespace

caf::expected<trace> parse_mooncake(line_source& lines, const std::string& name, const trace_read_options& options) {
  trace_builder builder(name, options);
  while (auto line = lines.next()) {
    if (line->find_first_not_of(" \t") == std::string_view::npos)
      continue; // blank lines carry no request
    trace_request request;
    int64_t raw_ns = 0;
    auto what = read_row(*line, options.block_tokens, raw_ns, request);
    if (!what.empty()) {
      if (auto err = builder.bad_row(lines.number(), what))
        return err;
      continue;
    }
    if (!builder.add(lines.number(), raw_ns, std::move(request)))
      break;
  }
  return builder.finish();
}

} // namespace kvtier::sim::detail
