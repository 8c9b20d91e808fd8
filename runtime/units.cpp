#include "runtime/units.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

namespace kvtier {
namespace {

struct split_number {
  double value;
  std::string_view suffix;
};

// Digits, '.', '_' then a unit. No sign, no exponent, no "nan"/"inf": a size
// or a count is a plain non-negative decimal.
caf::expected<split_number> split(std::string_view text, std::string_view what) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == '_'))
    ++i;
  std::string digits;
  for (char c : text.substr(0, i))
    if (c != '_')
      digits += c;
  double value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec == std::errc::invalid_argument || ptr != digits.data() + digits.size())
    return make_error(errc::invalid_argument,
                      fmt::format("'{}' is not a {}: expected a number with an optional unit", text, what));
  if (ec == std::errc::result_out_of_range || !std::isfinite(value))
    return make_error(errc::invalid_argument, fmt::format("'{}' is too large for a {}", text, what));
  auto suffix = text.substr(i);
  while (!suffix.empty() && suffix.front() == ' ')
    suffix.remove_prefix(1);
  return split_number{value, suffix};
}

// value * scale as a whole number, or an error when it does not fit 64 bits.
// 2^64 as a double is exact; anything at or above it overflows.
caf::expected<uint64_t> scaled(std::string_view text, double value, double scale, std::string_view what) {
  double product = std::round(value * scale);
  if (!std::isfinite(product) || product >= 18446744073709551616.0)
    return make_error(errc::invalid_argument,
                      fmt::format("'{}' is too large for a {}: expected at most {}", text, what,
                                  what == "size" ? "16 EiB" : "2^64 - 1"));
  return static_cast<uint64_t>(product);
}

} // namespace

caf::expected<uint64_t> parse_bytes(std::string_view text) {
  auto parts = split(text, "size");
  if (!parts)
    return std::move(parts.error());
  static constexpr std::array<std::pair<std::string_view, double>, 13> units{{
      {"", 1.0},
      {"B", 1.0},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"KiB", 1024.0},
      {"MiB", 1048576.0},
      {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0},
      {"K", 1024.0},
      {"M", 1048576.0},
      {"G", 1073741824.0},
  }};
  for (auto [suffix, scale] : units)
    if (parts->suffix == suffix)
      return scaled(text, parts->value, scale, "size");
  return make_error(errc::invalid_argument,
                    fmt::format("'{}' has unknown size unit '{}': expected B, KB, MB, GB, TB, KiB, MiB, GiB or TiB",
                                text, parts->suffix));
}

caf::expected<uint64_t> parse_tokens(std::string_view text) {
  auto parts = split(text, "token count");
  if (!parts)
    return std::move(parts.error());
  double scale = 0;
  if (parts->suffix.empty())
    scale = 1;
  else if (parts->suffix == "k" || parts->suffix == "K")
    scale = 1024;
  else if (parts->suffix == "m" || parts->suffix == "M")
    scale = 1024.0 * 1024.0;
  else
    return make_error(
        errc::invalid_argument,
        fmt::format("'{}' has unknown token unit '{}': expected none, k (1024) or M (1024*1024)", text, parts->suffix));
  return scaled(text, parts->value, scale, "token count");
}
std::string format_bytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> names{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < names.size()) {
    value /= 1024.0;
    ++unit;
  }
  if (unit == 0)
    return fmt::format("{} B", bytes);
  return fmt::format("{:.2f} {}", value, names[unit]);
}

std::string format_count(uint64_t value) {
  auto digits = std::to_string(value);
  std::string out;
  int since_sep = static_cast<int>(digits.size() % 3);
  if (since_sep == 0)
    since_sep = 3;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && since_sep == 0) {
      out += ',';
      since_sep = 3;
    }
    out += digits[i];
    --since_sep;
  }
  return out;
}

} // namespace kvtier
