#include "sim/trace_builder.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace kvtier::sim::detail {

// ---------------------------------------------------------------------------
// trace_builder

trace_builder::trace_builder(std::string name, const trace_read_options& options)
    : name_(std::move(name)), options_(options) {
}

caf::error trace_builder::bad_row(uint64_t line, const std::string& what) {
  auto message = fmt::format("{}:{}: {}", name_, line, what);
  if (!options_.skip_bad)
    return make_error(errc::invalid_trace, std::move(message));
  ++skipped_;
  if (examples_.size() < max_skipped_examples)
    examples_.push_back(std::move(message));
  return {};
}

bool trace_builder::full() const {
  return options_.max_requests != 0 && requests_.size() >= options_.max_requests;
}

bool trace_builder::add(uint64_t line, int64_t raw_ns, trace_request request) {
  requests_.push_back(std::move(request));
  raw_ns_.push_back(raw_ns);
  lines_.push_back(line);
  return !full();
}

caf::expected<trace> trace_builder::finish() {
  if (requests_.empty()) {
    if (skipped_ > 0)
      return make_error(errc::invalid_trace,
                        fmt::format("{}: no valid rows ({} skipped; first: {})", name_, skipped_, examples_.front()));
    return make_error(errc::invalid_trace, fmt::format("{}: the trace has no requests", name_));
  }
  trace out;
  out.source = name_;
  out.skipped_rows = skipped_;
  out.skipped_examples = std::move(examples_);
  out.failed_requests = failed_;
  int64_t first = *std::min_element(raw_ns_.begin(), raw_ns_.end());
  for (size_t i = 0; i < requests_.size(); ++i) {
    auto& r = requests_[i];
    r.id = i;
    // Differences stay exact in integers; one rounding when turned into seconds.
    double raw_s = static_cast<double>(raw_ns_[i] - first) / 1e9;
    r.arrival_s = raw_s * options_.time_scale;
    if (!(r.arrival_s <= max_arrival_s))
      return make_error(errc::invalid_trace,
                        fmt::format("{}:{}: arrives {:g} s after the first request; at time_scale {:g} that is {:g} s, "
                                    "past the simulator's limit of {:g} s (about {:.0f} years)",
                                    name_, lines_[i], raw_s, options_.time_scale, r.arrival_s, max_arrival_s,
                                    max_arrival_s / (365.25 * 86400)));
    if (i > 0 && raw_ns_[i] < raw_ns_[i - 1])
      ++out.out_of_order_rows;
  }
  out.requests = std::move(requests_);
  out.stats = compute_stats(out.requests);
  return out;
}

// ---------------------------------------------------------------------------
// field parsing

std::optional<uint64_t> parse_uint(std::string_view text, uint64_t max) {
  if (text.empty() || text.front() < '0' || text.front() > '9')
    return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value > max)
    return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  if (text.starts_with('+'))
    text.remove_prefix(1);
  if (text.empty())
    return std::nullopt;
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
    return std::nullopt;
  return value;
}

namespace {

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (H. Hinnant).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool is_leap(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

std::optional<unsigned> digits(std::string_view text, size_t at, size_t count) {
  if (at + count > text.size())
    return std::nullopt;
  unsigned value = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9')
      return std::nullopt;
    value = value * 10 + static_cast<unsigned>(text[i] - '0');
  }
  return value;
}

} // namespace

std::optional<int64_t> parse_timestamp_ns(std::string_view text) {
  // YYYY-MM-DD HH:MM:SS
  auto year = digits(text, 0, 4);
  auto month = digits(text, 5, 2);
  auto day = digits(text, 8, 2);
  auto hour = digits(text, 11, 2);
  auto minute = digits(text, 14, 2);
  auto second = digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || text[4] != '-' || text[7] != '-' ||
      (text[10] != ' ' && text[10] != 'T') || text[13] != ':' || text[16] != ':')
    return std::nullopt;
  static constexpr unsigned month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  // Years 1970..2199 keep nanoseconds since 1970 (and their differences) inside int64.
  if (*year < 1970 || *year > 2199 || *month < 1 || *month > 12 || *day < 1 || *hour > 23 || *minute > 59 ||
      *second > 60)
    return std::nullopt;
  if (*day > month_days[*month - 1] + (*month == 2 && is_leap(*year) ? 1 : 0))
    return std::nullopt;
  size_t at = 19;
  int64_t fraction_ns = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    int64_t scale = 100'000'000;
    size_t count = 0;
    for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++count) {
      if (count < 9) {
        fraction_ns += (text[at] - '0') * scale;
        scale /= 10;
      }
    }
    if (count == 0)
      return std::nullopt;
  }
  int64_t offset_s = 0;
  if (at < text.size()) {
    std::string_view zone = text.substr(at);
    if (zone == "Z") {
      // UTC
    } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
      auto oh = digits(zone, 1, 2);
      auto om = digits(zone, 4, 2);
      if (!oh || !om || *oh > 23 || *om > 59)
        return std::nullopt;
      offset_s = (zone[0] == '+' ? 1 : -1) * static_cast<int64_t>(*oh * 3600 + *om * 60);
    } else {
      return std::nullopt;
    }
  }
  int64_t seconds = days_from_civil(*year, *month, *day) * 86400 + *hour * 3600 + *minute * 60 + *second - offset_s;
  return seconds * 1'000'000'000 + fraction_ns;
}

std::vector<std::string_view> split_csv(std::string_view line) {
  std::vector<std::string_view> fields;
  auto trim = [](std::string_view f) {
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t'))
      f.remove_prefix(1);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t'))
      f.remove_suffix(1);
    return f;
  };
  size_t start = 0;
  while (true) {
    auto comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return fields;
}

std::string quote(std::string_view text) {
  constexpr size_t limit = 40;
  std::string out = "\"";
  for (char c : text.substr(0, limit)) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f)
      out += fmt::format("\\x{:02x}", u);
    else
      out += c;
  }
  if (text.size() > limit)
    out += "...";
  out += '"';
  return out;
}

} // namespace kvtier::sim::detail
