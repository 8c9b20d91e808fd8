// Fuzz target: the size and token-count parsers and printers of runtime/units.hpp.
// Invariants:
//  (1) parse_bytes / parse_tokens accept a text only when its value fits in
//      uint64, and then return that value (rounded to a whole number);
//  (2) parse_bytes(format_bytes(x)) is x within the 2 printed decimals, for every
//      x that format_bytes prints in a unit parse_bytes reads (below 1 PiB);
//  (3) format_count(x) is x's decimal digits with a comma every three.
// The input is the text for (1); its first 8 bytes are also x for (2) and (3).

#include "tests/fuzz/fuzz_require.hpp"

#include "runtime/units.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace {

using kvtier::fuzz::fuzz_require;

// The value a size or token text names, computed independently of units.cpp
// in long double: number with '_' separators, optional spaces, a unit. nullopt
// when the text has no such form (the parser must then reject it anyway).
template <size_t N>
std::optional<long double> expected_value(std::string_view text,
                                          const std::array<std::pair<std::string_view, long double>, N>& units) {
  size_t i = 0;
  std::string digits;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.' || text[i] == '_')) {
    if (text[i] != '_')
      digits += text[i];
    ++i;
  }
  auto suffix = text.substr(i);
  while (!suffix.empty() && suffix.front() == ' ')
    suffix.remove_prefix(1);
  if (digits.empty())
    return std::nullopt;
  char* end = nullptr;
  long double number = std::strtold(digits.c_str(), &end);
  if (end != digits.c_str() + digits.size())
    return std::nullopt;
  for (auto [unit, scale] : units)
    if (suffix == unit)
      return number * scale;
  return std::nullopt;
}

constexpr long double uint64_limit = 18446744073709551615.0L;

void check_parsed(std::string_view what, std::string_view text, const caf::expected<uint64_t>& parsed,
                  std::optional<long double> expected) {
  if (!parsed)
    return; // rejecting is always allowed; the message is checked by unit tests
  fuzz_require(expected.has_value(), "{} accepted '{}' as {}, which names no value", what, text, *parsed);
  fuzz_require(*expected <= uint64_limit, "{} accepted '{}' ({}) beyond 2^64 as {}", what, text,
               static_cast<double>(*expected), *parsed);
  long double error = std::fabs(static_cast<long double>(*parsed) - *expected);
  // Whole numbers only (+-0.5 from rounding) and the double arithmetic's last bits.
  fuzz_require(error <= 0.5L + *expected * 1e-12L, "{} read '{}' as {}, not {}", what, text, *parsed,
               static_cast<double>(*expected));
}

void check_parsers(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, long double>, 13> byte_units{{
      {"", 1.0L},
      {"B", 1.0L},
      {"KB", 1e3L},
      {"MB", 1e6L},
      {"GB", 1e9L},
      {"TB", 1e12L},
      {"KiB", 1024.0L},
      {"MiB", 1048576.0L},
      {"GiB", 1073741824.0L},
      {"TiB", 1099511627776.0L},
      {"K", 1024.0L},
      {"M", 1048576.0L},
      {"G", 1073741824.0L},
  }};
  static constexpr std::array<std::pair<std::string_view, long double>, 5> token_units{{
      {"", 1.0L},
      {"k", 1024.0L},
      {"K", 1024.0L},
      {"m", 1048576.0L},
      {"M", 1048576.0L},
  }};
  check_parsed("parse_bytes", text, kvtier::parse_bytes(text), expected_value(text, byte_units));
  check_parsed("parse_tokens", text, kvtier::parse_tokens(text), expected_value(text, token_units));
}

void check_printers(uint64_t x) {
  auto count = kvtier::format_count(x);
  std::string digits;
  for (size_t i = 0; i < count.size(); ++i) {
    bool comma_here = i > 0 && (count.size() - i) % 4 == 0;
    fuzz_require(comma_here == (count[i] == ','), "format_count({}) = {}", x, count);
    if (!comma_here)
      digits += count[i];
  }
  fuzz_require(digits == std::to_string(x), "format_count({}) = {}", x, count);

  constexpr uint64_t one_pib = uint64_t{1} << 50; // format_bytes prints PiB from here, parse_bytes stops at TiB
  if (x >= one_pib)
    return;
  auto text = kvtier::format_bytes(x);
  auto back = kvtier::parse_bytes(text);
  fuzz_require(static_cast<bool>(back), "parse_bytes rejects format_bytes({}) = '{}'", x, text);
  // Two decimals of a value in [1, 1024): off by at most 0.005 of the unit, 0.5% of x.
  double error = std::fabs(static_cast<double>(*back) - static_cast<double>(x));
  fuzz_require(error <= static_cast<double>(x) * 0.005 + 0.5, "parse_bytes(format_bytes({})) = {} ('{}')", x, *back,
               text);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_parsers(kvtier::fuzz::as_text(data, size));
  uint64_t x = 0;
  if (size > 0)
    std::memcpy(&x, data, std::min(size, sizeof x));
  check_printers(x);
  return 0;
}
