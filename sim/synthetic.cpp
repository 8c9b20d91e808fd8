// The synthetic trace generator; the model is described in runtime/synthetic_spec.hpp.

#include "runtime/error.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <queue>
#include <random>
#include <unordered_map>

namespace kvtier::sim {
namespace {

// Draws from std::mt19937_64, whose output the standard fixes; the
// distributions are written here because std's are implementation-defined.
class random_source {
public:
  explicit random_source(uint64_t seed) : engine_(seed) {}

  /// Uniform in [0, 1), 53 bits.
  double unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  /// Uniform integer in [lo, hi], without modulo bias.
  uint64_t between(uint64_t lo, uint64_t hi) {
    uint64_t span = hi - lo + 1;
    if (span == 0)
      return engine_(); // the full 64-bit range
    uint64_t threshold = (0 - span) % span;
    while (true) {
      uint64_t r = engine_();
      if (r >= threshold)
        return lo + r % span;
    }
  }

  /// Exponential with the given mean (0 gives 0).
  double exponential(double mean) { return -mean * std::log1p(-unit()); }

  /// Standard normal (Box-Muller, one of the pair).
  double normal() {
    double u1 = 1.0 - unit(); // (0, 1]
    double u2 = unit();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  uint32_t length(const length_distribution& d) {
    switch (d.dist) {
      case length_distribution::shape::fixed:
        return d.value;
      case length_distribution::shape::uniform:
        return static_cast<uint32_t>(between(d.min, d.max));
      case length_distribution::shape::lognormal: {
        // mean of exp(N(mu, sigma^2)) is exp(mu + sigma^2 / 2)
        double mu = std::log(d.mean) - d.sigma * d.sigma / 2;
        double x = std::exp(mu + d.sigma * normal());
        double clamped = std::clamp(std::round(x), static_cast<double>(d.min), static_cast<double>(d.max));
        return static_cast<uint32_t>(clamped);
      }
    }
    return 0;
  }

private:
  std::mt19937_64 engine_;
};

struct pending {
  double arrival_s;
  trace_request request;
};

} // namespace

caf::expected<trace> generate_synthetic(const synthetic_spec& spec, const trace_read_options& options) {
  if (auto err = validate(spec))
    return err;
  if (!(options.time_scale > 0) || !std::isfinite(options.time_scale))
    return make_error(errc::invalid_argument,
                      fmt::format("synthetic time_scale: expected a positive number, got {}", options.time_scale));
  // The trace keeps the `wanted` earliest arrivals. Sessions start in time
  // order and a session's requests arrive at or after its start, so once a
  // session starts after the wanted-th earliest arrival seen so far, neither it
  // nor any later session holds a request of the trace: generation stops there.
  const uint64_t wanted = options.max_requests ? std::min(options.max_requests, spec.requests) : spec.requests;
  // (Without a cut, spec.requests ends generation by itself: no heap needed.)
  const bool cut = wanted < spec.requests;
  std::priority_queue<double> earliest; // the `wanted` earliest arrivals so far, latest on top
  auto cutoff = [&] { return earliest.size() < wanted ? std::numeric_limits<double>::infinity() : earliest.top(); };
  random_source rng(spec.seed);
  const uint64_t block = spec.block_tokens;
  const uint64_t prefix_blocks = spec.shared_prefix_tokens / block; // full blocks of a system prompt
  const double session_gap_s = static_cast<double>(spec.turns_per_session) / spec.rate_per_s;
  const uint64_t max_input =
      spec.max_input_tokens ? spec.max_input_tokens : uint64_t{std::numeric_limits<uint32_t>::max()};
  // Logical block keys: system-prompt block j of group g is g * prefix_blocks + j;
  // every other block gets a fresh key. They are renumbered in arrival order below.
  uint64_t next_key = uint64_t{spec.prefix_groups} * prefix_blocks;

  std::vector<pending> out;
  out.reserve(wanted);
  double session_start = 0;
  for (uint64_t session = 1; out.size() < spec.requests; ++session) {
    if (session > 1)
      session_start += rng.exponential(session_gap_s);
    if (cut && session_start > cutoff())
      break;
    uint64_t tenant = spec.tenants ? rng.between(1, spec.tenants) : 0;
    uint64_t group = rng.between(0, spec.prefix_groups - 1);
    std::vector<uint64_t> reusable; // keys of the full blocks of the previous turn's input
    for (uint64_t j = 0; j < prefix_blocks; ++j)
      reusable.push_back(group * prefix_blocks + j);
    uint64_t history = spec.shared_prefix_tokens; // tokens before this turn's new ones
    double arrival = session_start;
    for (uint32_t turn = 0; turn < spec.turns_per_session && out.size() < spec.requests; ++turn) {
      if (turn > 0)
        arrival += rng.exponential(spec.think_time_s);
      uint64_t fresh = rng.length(spec.input);
      uint32_t output = rng.length(spec.output);
      uint64_t input = history + fresh;
      if (input > max_input) {
        if (turn > 0)
          break; // the conversation outgrew the context: the session ends
        input = max_input;
      }
      trace_request r;
      r.input_tokens = static_cast<uint32_t>(input);
      r.output_tokens = output;
      r.tenant = tenant;
      r.session = spec.turns_per_session > 1 ? session : 0;
      r.block_tokens = spec.block_tokens;
      uint64_t blocks = (input + block - 1) / block;
      r.block_ids.reserve(blocks);
      for (uint64_t j = 0; j < blocks; ++j)
        r.block_ids.push_back(j < reusable.size() ? reusable[j] : next_key++);
      // The next turn's prefix is this input + output: this input's full blocks
      // carry over; the partial last block will hold other tokens, so it does not.
      reusable.assign(r.block_ids.begin(), r.block_ids.begin() + static_cast<ptrdiff_t>(input / block));
      history = input + output;
      out.push_back({arrival, std::move(r)}); // stable sort keeps generation order on ties
      if (cut) {
        earliest.push(arrival);
        if (earliest.size() > wanted)
          earliest.pop();
      }
    }
  }

  std::stable_sort(out.begin(), out.end(),
                   [](const pending& a, const pending& b) { return a.arrival_s < b.arrival_s; });
  if (out.size() > wanted)
    out.erase(out.begin() + static_cast<ptrdiff_t>(wanted), out.end());
  for (size_t i = 0; i < out.size(); ++i) {
    double scaled = out[i].arrival_s * options.time_scale;
    if (!(scaled <= max_arrival_s)) // NaN and infinity too
      return make_error(
          errc::invalid_argument,
          fmt::format("synthetic: request {} arrives at {:g} s, past the simulator's limit of {:g} s (about "
                      "{:.0f} years)",
                      i, scaled, max_arrival_s, max_arrival_s / (365.25 * 86400)));
    out[i].arrival_s = scaled;
  }
  trace t;
  t.source = fmt::format("synthetic(seed={})", spec.seed);
  t.requests.reserve(out.size());
  std::unordered_map<uint64_t, uint64_t> dense; // logical key -> id, numbered in order of first use
  for (auto& p : out) {
    auto& r = p.request;
    r.id = t.requests.size();
    r.arrival_s = p.arrival_s;
    for (auto& key : r.block_ids)
      key = dense.try_emplace(key, dense.size()).first->second;
    t.requests.push_back(std::move(r));
  }
  t.stats = compute_stats(t.requests);
  return t;
}

} // namespace kvtier::sim
