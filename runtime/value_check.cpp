#include "runtime/value_check.hpp"

#include "runtime/units.hpp"

#include <fmt/format.h>

namespace kvtier {

std::optional<std::string> number_problem(double v, bounds<double> b) {
  if (v >= b.min && v <= b.max) // false for NaN
    return std::nullopt;
  return fmt::format("expected a number in {}..{}, got {}", b.min, b.max, v);
}

std::optional<std::string> integer_problem(uint64_t v, bounds<uint64_t> b) {
  if (v >= b.min && v <= b.max)
    return std::nullopt;
  return fmt::format("expected an integer in {}..{}, got {}", b.min, b.max, v);
}

std::optional<std::string> size_problem(uint64_t v, bounds<uint64_t> b) {
  if (v >= b.min && v <= b.max)
    return std::nullopt;
  return fmt::format("expected a size in {}..{}, got {}", format_bytes(b.min), format_bytes(b.max), format_bytes(v));
}

} // namespace kvtier
