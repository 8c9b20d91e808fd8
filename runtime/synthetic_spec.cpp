#include "runtime/synthetic_spec.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace kvtier {

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
    case length_distribution::shape::fixed:
      return "fixed";
    case length_distribution::shape::uniform:
      return "uniform";
    case length_distribution::shape::lognormal:
      return "lognormal";
  }
  return "unknown";
}

namespace {

constexpr uint32_t max_length = synthetic_max_length;
constexpr double max_mean = synthetic_max_mean;
constexpr double max_sigma = synthetic_max_sigma;
constexpr uint64_t max_requests = synthetic_max_requests;

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

} // namespace kvtier
