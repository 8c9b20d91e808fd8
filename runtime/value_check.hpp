#pragma once
// The one range check every configured number goes through, whether it came
// from a TOML file, a command-line flag, a hardware profile or a library
// caller. NaN is inside no range (the checks are written so that a NaN
// comparison fails them), and neither is infinity, since every bound is finite.

#include <cstdint>
#include <optional>
#include <string>

namespace kvtier {

template <class T>
struct bounds {
  T min;
  T max;
};

/// nullopt when min <= v <= max, else "expected a number in MIN..MAX, got V".
std::optional<std::string> number_problem(double v, bounds<double> b);
/// nullopt when min <= v <= max, else "expected an integer in MIN..MAX, got V".
std::optional<std::string> integer_problem(uint64_t v, bounds<uint64_t> b);
/// nullopt when min <= v <= max, else "expected a size in MIN..MAX, got V" (sizes as "1.50 GiB").
std::optional<std::string> size_problem(uint64_t v, bounds<uint64_t> b);

} // namespace kvtier
