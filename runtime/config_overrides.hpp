#pragma once
// Command-line values that replace a loaded config's: `--hbm 40GB` is
// [tiers.hbm] capacity. They are parsed as strictly as the file's values
// (sizes with overflow checks, integers without sign or fraction, numbers
// that are finite) and the changed config goes through validate() again, so
// a flag cannot reach a value the file could not. Errors name the flag.

#include "runtime/config.hpp"

#include <caf/error.hpp>

#include <optional>
#include <string>

namespace kvtier {

struct config_overrides {
  std::optional<std::string> hbm;          // --hbm: a size or "auto"
  std::optional<std::string> dram;         // --dram: a size; 0 turns the tier off
  std::optional<std::string> nvme;         // --nvme: a size; 0 turns the tier off
  std::optional<std::string> trace;        // --trace: a path
  std::optional<std::string> format;       // --format: auto, mooncake, azure, burstgpt, synthetic
  std::optional<std::string> max_requests; // --max-requests: a count; 0 = all
  std::optional<std::string> time_scale;   // --time-scale: a positive number
  bool skip_bad = false;                   // --skip-bad
};

/// Applies every given value, then validates. errc::invalid_argument
/// "--FLAG: what was expected, got what" for a flag's own value or for the
/// config rule it breaks; errc::invalid_config for other problems.
caf::error apply_overrides(config& cfg, const config_overrides& overrides);

/// A whole, unsigned decimal integer ("50", "1_000"): no sign, fraction or
/// exponent, at most 2^64 - 1. Errors are errc::invalid_argument "expected ..., got ...".
caf::expected<uint64_t> parse_count(std::string_view text);
/// A finite decimal number ("0.5", "1e3"); NaN and infinities are errors.
caf::expected<double> parse_finite(std::string_view text);

} // namespace kvtier
