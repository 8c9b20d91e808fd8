#pragma once
// What the simulator's synthetic trace generator (sim/synthetic.cpp) makes: the
// [sim.synthetic] table of a config, read by runtime/config_reader.cpp.
//
// Model (docs/traces.md has the long form):
//  - Sessions start as a Poisson process at rate_per_s / turns_per_session, so
//    the long-run request rate is rate_per_s; the first session starts at 0.
//  - A session has turns_per_session turns; turn k+1 arrives an exponential
//    think time (mean think_time_s) after turn k's arrival (open loop: it does
//    not wait for turn k to finish).
//  - Turn 1's input = the session group's shared prefix (shared_prefix_tokens,
//    one of prefix_groups system prompts) + new tokens drawn from `input`.
//    Turn k+1's input = turn k's input + turn k's output + new tokens.
//  - Block ids are chained prefix ids of block_tokens-token blocks, like
//    Mooncake's hash_ids: equal id at position i = equal prefix up to block i.
//  - Every session has one tenant: 0 when tenants = 0, else uniform in 1..tenants.
//  - Deterministic for a seed: the same spec gives the same trace on every
//    platform (own distribution code over std::mt19937_64; libm's exp/log aside).

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kvtier {

struct length_distribution {
  enum class shape : uint8_t { fixed, uniform, lognormal };
  shape dist = shape::lognormal;
  uint32_t value = 0; // fixed: every draw
  double mean = 1024; // lognormal: mean of the distribution, in tokens
  double sigma = 1.0; // lognormal: standard deviation of the underlying normal
  uint32_t min = 1;   // uniform: bounds, inclusive; lognormal: draws are clamped to them
  uint32_t max = 1u << 20;

  static length_distribution fixed(uint32_t tokens);
  static length_distribution uniform(uint32_t lo, uint32_t hi);
  static length_distribution lognormal(double mean, double sigma, uint32_t lo = 1, uint32_t hi = 1u << 20);
};

const char* to_string(length_distribution::shape shape);

struct synthetic_spec {
  uint64_t requests = 1000;                                              // requests in the trace
  double rate_per_s = 1.0;                                               // long-run request arrival rate
  length_distribution input = length_distribution::lognormal(1024, 1.0); // new tokens per turn
  length_distribution output = length_distribution::lognormal(256, 0.8); // output tokens per turn
  uint32_t shared_prefix_tokens = 0; // system prompt at the start of every session (0 = none)
  uint32_t prefix_groups = 1;        // distinct system prompts; a session picks one uniformly
  uint32_t turns_per_session = 1;    // 1 = independent requests (session ids stay 0)
  double think_time_s = 10.0;        // mean gap between a session's turns
  uint64_t seed = 1;
  uint32_t tenants = 0;          // 0 = all requests in the shared tenant 0
  uint32_t block_tokens = 512;   // tokens per block id
  uint32_t max_input_tokens = 0; // 0 = unbounded; else a session ends before a turn longer than this
                                 // (a first turn is cut to it)
};

/// Bounds shared by the config reader and validate().
inline constexpr uint32_t synthetic_max_length = 1u << 24; // 16M tokens: beyond any model's context
inline constexpr double synthetic_max_mean = 1 << 24;
inline constexpr double synthetic_max_sigma = 10; // exp(10 sigma) overflows nothing, but 10 is already absurd
inline constexpr uint64_t synthetic_max_requests = 100'000'000; // a trace of 100M requests is ~10 GB in memory

/// Checks the spec's domains; errc::invalid_argument naming the field
/// ("synthetic input: min 50 is above max 10").
[[nodiscard]] caf::error validate(const synthetic_spec& spec);

} // namespace kvtier
