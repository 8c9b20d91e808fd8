#include "sim/synthetic_spec.hpp"

#include "runtime/error.hpp"
#include "runtime/toml_reader.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kvtier::sim {

length_distribution length_distribution::fixed(uint32_t tokens) {
  length_distribution d;
  d.dist = shape::fixed;
  d.value = tokens;
  return d;
}

length_distribution length_distribution::uniform(uint32_t lo, uint32_t hi) {
  length_distribution d;
  d.dist = shape::uniform;
  d.min = lo;
  d.max = hi;
  return d;
}

length_distribution length_distribution::lognormal(double mean, double sigma, uint32_t lo, uint32_t hi) {
  length_distribution d;
  d.dist = shape::lognormal;
  d.mean = mean;
  d.sigma = sigma;
  d.min = lo;
  d.max = hi;
  return d;
}

const char* to_string(length_distribution::shape shape) {
  switch (shape) {
    case length_distribution::shape::fixed: return "fixed";
    case length_distribution::shape::uniform: return "uniform";
    case length_distribution::shape::lognormal: return "lognormal";
  }
  return "unknown";
}

namespace {

// Bounds shared by the TOML reader and validate().
constexpr uint32_t max_length = 1u << 24;      // 16M tokens: beyond any model's context
constexpr double max_mean = 1 << 24;
constexpr double max_sigma = 10;               // exp(10 sigma) overflows nothing, but 10 is already absurd
constexpr uint64_t max_requests = 100'000'000; // a trace of 100M requests is ~10 GB in memory

caf::error check_distribution(const length_distribution& d, std::string_view name) {
  auto bad = [&](std::string what) {
    return make_error(errc::invalid_argument, fmt::format("synthetic {}: {}", name, what));
  };
  switch (d.dist) {
    case length_distribution::shape::fixed:
      if (d.value > max_length)
        return bad(fmt::format("fixed value {} is above {}", d.value, max_length));
      break;
    case length_distribution::shape::lognormal:
      if (!(d.mean > 0) || d.mean > max_mean)
        return bad(fmt::format("lognormal mean must be in (0, {}], got {}", max_mean, d.mean));
      if (!(d.sigma >= 0) || d.sigma > max_sigma)
        return bad(fmt::format("lognormal sigma must be in 0..{}, got {}", max_sigma, d.sigma));
      [[fallthrough]];
    case length_distribution::shape::uniform:
      if (d.min > d.max)
        return bad(fmt::format("min {} is above max {}", d.min, d.max));
      if (d.max > max_length)
        return bad(fmt::format("max {} is above {}", d.max, max_length));
      break;
  }
  return {};
}

caf::error read_distribution(toml_reader& parent, const toml::table& root, std::string_view key,
                             length_distribution& out) {
  const toml::node* node = root.get(key);
  if (!node)
    return {};
  if (node->is_integer()) {
    uint32_t tokens = 0;
    parent.read(key, tokens, 0, max_length);
    if (parent.ok())
      out = length_distribution::fixed(tokens);
    return parent.error();
  }
  auto table = parent.sub_table(key);
  if (!table)
    return parent.error();
  toml_reader r(*table, parent.file(), fmt::format("sim.synthetic.{}", key));
  std::string dist;
  if (!table->contains("dist")) {
    r.fail("dist", "missing; expected \"fixed\", \"uniform\" or \"lognormal\"");
    return r.error();
  }
  r.read_choice("dist", dist, {"fixed", "uniform", "lognormal"});
  if (!r.ok())
    return r.error();
  auto require = [&](std::string_view k) {
    if (!table->contains(k))
      r.fail(k, fmt::format("missing; a {} distribution needs it", dist));
  };
  length_distribution d;
  if (dist == "fixed") {
    require("value");
    r.read("value", d.value, 0, max_length);
    d = length_distribution::fixed(d.value);
    if (auto err = r.finish({"dist", "value"}))
      return err;
  } else if (dist == "uniform") {
    require("min");
    require("max");
    d.dist = length_distribution::shape::uniform;
    r.read("min", d.min, 0, max_length);
    r.read("max", d.max, 0, max_length);
    if (r.ok() && d.min > d.max)
      r.fail("max", fmt::format("expected max >= min ({}), got {}", d.min, d.max));
    if (auto err = r.finish({"dist", "min", "max"}))
      return err;
  } else {
    require("mean");
    d.dist = length_distribution::shape::lognormal;
    r.read("mean", d.mean, 1, max_mean);
    r.read("sigma", d.sigma, 0, max_sigma);
    r.read("min", d.min, 0, max_length);
    r.read("max", d.max, 0, max_length);
    if (r.ok() && d.min > d.max)
      r.fail("max", fmt::format("expected max >= min ({}), got {}", d.min, d.max));
    if (auto err = r.finish({"dist", "mean", "sigma", "min", "max"}))
      return err;
  }
  out = d;
  return {};
}

} // namespace

caf::error validate(const synthetic_spec& s) {
  auto bad = [](std::string what) { return make_error(errc::invalid_argument, "synthetic " + what); };
  if (s.requests == 0 || s.requests > max_requests)
    return bad(fmt::format("requests must be in 1..{}, got {}", max_requests, s.requests));
  if (!(s.rate_per_s > 0) || !std::isfinite(s.rate_per_s))
    return bad(fmt::format("rate_per_s must be a positive number, got {}", s.rate_per_s));
  if (s.prefix_groups == 0)
    return bad("prefix_groups must be at least 1, got 0");
  if (s.turns_per_session == 0)
    return bad("turns_per_session must be at least 1, got 0");
  if (!(s.think_time_s >= 0) || !std::isfinite(s.think_time_s))
    return bad(fmt::format("think_time_s must be a non-negative number, got {}", s.think_time_s));
  if (s.block_tokens == 0)
    return bad("block_tokens must be at least 1, got 0");
  if (auto err = check_distribution(s.input, "input"))
    return err;
  return check_distribution(s.output, "output");
}

caf::expected<synthetic_spec> parse_synthetic_spec(const toml::table& table, const std::string& file) {
  synthetic_spec s;
  toml_reader r(table, file, "sim.synthetic");
  constexpr uint32_t max_u32 = std::numeric_limits<uint32_t>::max();
  r.read("requests", s.requests, 1, max_requests);
  r.read("rate_per_s", s.rate_per_s, 1e-9, 1e9);
  if (auto err = read_distribution(r, table, "input", s.input))
    return err;
  if (auto err = read_distribution(r, table, "output", s.output))
    return err;
  r.read("shared_prefix_tokens", s.shared_prefix_tokens, 0, max_length);
  r.read("prefix_groups", s.prefix_groups, 1, 1u << 20);
  r.read("turns_per_session", s.turns_per_session, 1, 1u << 20);
  r.read("think_time_s", s.think_time_s, 0, 1e9);
  r.read("seed", s.seed, 0, std::numeric_limits<uint64_t>::max());
  r.read("tenants", s.tenants, 0, 1u << 20);
  r.read("block_tokens", s.block_tokens, 1, 1u << 20);
  r.read("max_input_tokens", s.max_input_tokens, 0, max_u32);
  if (auto err = r.finish({"requests", "rate_per_s", "input", "output", "shared_prefix_tokens", "prefix_groups",
                           "turns_per_session", "think_time_s", "seed", "tenants", "block_tokens",
                           "max_input_tokens"}))
    return err;
  if (auto err = validate(s))
    return make_error(errc::invalid_config, fmt::format("{}: [sim.synthetic] {}", file, describe(err)));
  return s;
}

} // namespace kvtier::sim
