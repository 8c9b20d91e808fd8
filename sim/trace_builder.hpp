#pragma once
// Internal to the trace readers: the part every format shares. A reader takes
// lines from a line_source and feeds rows to a trace_builder, which applies
// skip_bad and max_requests, keeps the raw times exact (integer nanoseconds)
// and normalizes them at the end, refusing arrivals past max_arrival_s.

#include "sim/line_source.hpp"
#include "sim/trace.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::sim::detail {

class trace_builder {
public:
  trace_builder(std::string name, const trace_read_options& options);

  /// Reports a bad row. Returns the error to stop with, or {} when skip_bad
  /// counted the row and reading goes on.
  [[nodiscard]] caf::error bad_row(uint64_t line, const std::string& what);

  /// Adds the request of line `line` that arrived at `raw_ns` (any origin).
  /// Returns false once max_requests is reached: the reader should stop.
  bool add(uint64_t line, int64_t raw_ns, trace_request request);
  bool full() const;

  void count_failed() { ++failed_; }

  /// Normalizes arrival times, numbers the requests and computes the stats.
  [[nodiscard]] caf::expected<trace> finish();

  const std::string& name() const { return name_; }

private:
  std::string name_;
  trace_read_options options_;
  std::vector<trace_request> requests_;
  std::vector<int64_t> raw_ns_;
  std::vector<uint64_t> lines_; // of each request, for errors found at the end
  uint64_t skipped_ = 0;
  uint64_t failed_ = 0;
  std::vector<std::string> examples_;
};

/// Whole-field integer parse: digits only, <= max. nullopt otherwise.
std::optional<uint64_t> parse_uint(std::string_view text, uint64_t max);
/// Whole-field finite decimal number parse. nullopt otherwise.
std::optional<double> parse_double(std::string_view text);
/// "2023-11-16 18:17:03.9799600" (also 'T' separator, up to 9 fraction
/// digits, optional Z or +hh:mm) as nanoseconds since 1970-01-01 UTC; years 1970..2199.
std::optional<int64_t> parse_timestamp_ns(std::string_view text);
/// Splits a CSV line at commas (no quoting in the supported formats), trimming spaces.
std::vector<std::string_view> split_csv(std::string_view line);
/// `text` for an error message: quoted, shortened to 40 characters.
std::string quote(std::string_view text);

/// Largest raw time accepted, in nanoseconds: keeps differences inside int64.
inline constexpr int64_t max_raw_ns = int64_t{1} << 62;

caf::expected<trace> parse_mooncake(line_source& lines, const std::string& name, const trace_read_options& options);
caf::expected<trace> parse_azure(line_source& lines, const std::string& name, const trace_read_options& options);
caf::expected<trace> parse_burstgpt(line_source& lines, const std::string& name, const trace_read_options& options);

} // namespace kvtier::sim::detail
