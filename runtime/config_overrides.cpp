#include "runtime/config_overrides.hpp"

#include "runtime/config_names.hpp"
#include "runtime/error.hpp"
#include "runtime/units.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <tuple>
#include <vector>

namespace kvtier {

caf::expected<uint64_t> parse_count(std::string_view text) {
  std::string digits;
  for (char c : text)
    if (c != '_')
      digits += c;
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec == std::errc::invalid_argument || ptr != digits.data() + digits.size())
    return make_error(errc::invalid_argument, fmt::format("expected a whole number of at least 0, got \"{}\"", text));
  if (ec == std::errc::result_out_of_range)
    return make_error(errc::invalid_argument, fmt::format("expected a whole number below 2^64, got \"{}\"", text));
  return value;
}

caf::expected<double> parse_finite(std::string_view text) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || ptr != text.data() + text.size() || !std::isfinite(value))
    return make_error(errc::invalid_argument, fmt::format("expected a finite number, got \"{}\"", text));
  return value;
}

caf::error apply_overrides(config& cfg, const config_overrides& o) {
  struct applied {
    const char* flag;
    std::string value;
    std::string_view table, key;
  };
  std::vector<applied> given;
  auto flag_error = [](const char* flag, const std::string& value, const std::string& what) {
    return make_error(errc::invalid_argument, fmt::format("{} {}: {}", flag, value, what));
  };
  auto size = [&](const char* flag, const std::string& text) -> caf::expected<uint64_t> {
    auto bytes = parse_bytes(text);
    if (!bytes)
      return flag_error(flag, text, describe(bytes.error()));
    return *bytes;
  };
  if (o.hbm) {
    if (*o.hbm == "auto") {
      cfg.tiers.hbm.capacity_bytes.reset();
    } else {
      auto bytes = size("--hbm", *o.hbm);
      if (!bytes)
        return std::move(bytes.error());
      if (*bytes == 0)
        return flag_error("--hbm", *o.hbm, "expected \"auto\" or a size of at least one block, got 0 B");
      cfg.tiers.hbm.capacity_bytes = *bytes;
    }
    given.push_back({"--hbm", *o.hbm, "tiers.hbm", "capacity"});
  }
  for (auto [flag, text, tier, table] : {std::tuple{"--dram", &o.dram, &cfg.tiers.dram, "tiers.dram"},
                                         std::tuple{"--nvme", &o.nvme, &cfg.tiers.nvme, "tiers.nvme"}}) {
    if (!*text)
      continue;
    if (**text == "auto")
      return flag_error(flag, **text, "\"auto\" is only for --hbm; expected a size, or 0 to turn the tier off");
    auto bytes = size(flag, **text);
    if (!bytes)
      return std::move(bytes.error());
    *tier = {*bytes > 0, *bytes};
    given.push_back({flag, **text, table, "capacity"});
  }
  if (o.trace)
    cfg.sim.trace = *o.trace;
  if (o.format) {
    auto format = parse_choice<trace_format_choice>(*o.format);
    if (!format)
      return flag_error("--format", *o.format, fmt::format("expected one of {}", spelling_list<trace_format_choice>()));
    cfg.sim.trace_format = *format;
    given.push_back({"--format", *o.format, "sim", "trace_format"});
  }
  if (o.max_requests) {
    auto n = parse_count(*o.max_requests);
    if (!n)
      return flag_error("--max-requests", *o.max_requests, describe(n.error()));
    cfg.sim.max_requests = *n;
  }
  if (o.time_scale) {
    auto v = parse_finite(*o.time_scale);
    if (!v)
      return flag_error("--time-scale", *o.time_scale, describe(v.error()));
    cfg.sim.time_scale = *v;
    given.push_back({"--time-scale", *o.time_scale, "sim", "time_scale"});
  }
  cfg.sim.skip_bad = cfg.sim.skip_bad || o.skip_bad;
  auto problem = find_problem(cfg);
  if (!problem)
    return {};
  for (const auto& g : given)
    if (g.table == problem->table && g.key == problem->key)
      return flag_error(g.flag, g.value, problem->what);
  return validate(cfg);
}

} // namespace kvtier
