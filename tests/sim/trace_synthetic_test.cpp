// The synthetic generator: determinism, the prefix model, and its TOML form.

#include "runtime/error.hpp"
#include "runtime/config.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/trace.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

trace generate(const synthetic_spec& spec) {
  auto t = generate_synthetic(spec);
  if (!t) {
    ADD_FAILURE() << describe(t.error());
    return {};
  }
  return std::move(*t);
}

bool same(const trace_request& a, const trace_request& b) {
  return a.id == b.id && a.arrival_s == b.arrival_s && a.input_tokens == b.input_tokens &&
      a.output_tokens == b.output_tokens && a.block_ids == b.block_ids && a.block_tokens == b.block_tokens &&
      a.tenant == b.tenant && a.session == b.session;
}

caf::expected<synthetic_spec> parse(std::string_view text) {
  auto cfg = parse_config(text, "run.toml");
  if (!cfg)
    return cfg.error();
  if (!cfg->sim.synthetic)
    return make_error(errc::invalid_config, "no [sim.synthetic]");
  return *cfg->sim.synthetic;
}

std::string parse_error(std::string_view text) {
  auto spec = parse(text);
  if (spec)
    return "ok";
  EXPECT_TRUE(is(spec.error(), errc::invalid_config));
  return describe(spec.error());
}

} // namespace

TEST(trace_synthetic, same_seed_same_trace) {
  synthetic_spec spec;
  spec.requests = 2000;
  spec.shared_prefix_tokens = 700;
  spec.prefix_groups = 3;
  spec.turns_per_session = 4;
  spec.tenants = 2;
  auto a = generate(spec), b = generate(spec);
  ASSERT_EQ(a.requests.size(), 2000u);
  ASSERT_EQ(b.requests.size(), 2000u);
  for (size_t i = 0; i < a.requests.size(); ++i)
    ASSERT_TRUE(same(a.requests[i], b.requests[i])) << "request " << i;
  EXPECT_EQ(a.source, "synthetic(seed=1)");

  spec.seed = 2;
  auto c = generate(spec);
  size_t differ = 0;
  for (size_t i = 0; i < a.requests.size(); ++i)
    differ += !same(a.requests[i], c.requests[i]);
  EXPECT_GT(differ, 1900u);
}

TEST(trace_synthetic, default_spec_golden_values) {
  // Pins the generator's random stream; changing it changes every run's numbers.
  auto t = generate(synthetic_spec{});
  ASSERT_EQ(t.requests.size(), 1000u);
  const auto& r = t.requests;
  EXPECT_EQ(r[0].arrival_s, 0.0);
  EXPECT_EQ(r[0].input_tokens, 371u);
  EXPECT_EQ(r[0].output_tokens, 169u);
  EXPECT_NEAR(r[1].arrival_s, 2.4231500335629423, 1e-12);
  EXPECT_EQ(r[999].input_tokens, 400u);
  EXPECT_EQ(t.stats.input_tokens.total, 1'008'469u);
  EXPECT_EQ(t.stats.output_tokens.total, 240'006u);
  EXPECT_EQ(r[0].block_ids.front(), 0u); // ids are numbered in arrival order
  EXPECT_EQ(r[0].block_tokens, 512u);
  EXPECT_EQ(r[0].tenant, 0u);
  EXPECT_EQ(r[0].session, 0u);
}

TEST(trace_synthetic, poisson_arrivals_at_the_requested_rate) {
  synthetic_spec spec;
  spec.requests = 20'000;
  spec.rate_per_s = 4.0;
  auto t = generate(spec);
  // Mean gap 0.25 s; the standard error over 20k gaps is 0.25 / sqrt(20k) = 0.0018 s.
  EXPECT_NEAR(t.stats.duration_s / 19'999.0, 0.25, 0.01);
  for (size_t i = 1; i < t.requests.size(); ++i)
    ASSERT_LE(t.requests[i - 1].arrival_s, t.requests[i].arrival_s);
  // Lognormal mean 1024 (clamped at 1 and 2^20, which barely moves it).
  EXPECT_NEAR(t.stats.input_tokens.mean, 1024, 40);
  EXPECT_NEAR(t.stats.output_tokens.mean, 256, 8);

  // Sessions of 4 turns start at rate_per_s / 4: the request rate stays rate_per_s.
  spec.turns_per_session = 4;
  spec.think_time_s = 2;
  t = generate(spec);
  EXPECT_NEAR(t.stats.rate_per_s, 4.0, 0.15);
  EXPECT_EQ(t.stats.sessions, 5'000u);
}

TEST(trace_synthetic, length_distributions) {
  synthetic_spec spec;
  spec.requests = 5000;
  spec.input = length_distribution::uniform(100, 200);
  spec.output = length_distribution::fixed(7);
  auto t = generate(spec);
  EXPECT_EQ(t.stats.input_tokens.min, 100u);
  EXPECT_EQ(t.stats.input_tokens.max, 200u);
  EXPECT_NEAR(t.stats.input_tokens.mean, 150, 2);
  EXPECT_EQ(t.stats.output_tokens.min, 7u);
  EXPECT_EQ(t.stats.output_tokens.max, 7u);

  spec.input = length_distribution::lognormal(1000, 0.5, 900, 1100);
  t = generate(spec);
  EXPECT_EQ(t.stats.input_tokens.min, 900u);
  EXPECT_EQ(t.stats.input_tokens.max, 1100u);

  spec.input = length_distribution::lognormal(1000, 0); // sigma 0: always the mean
  t = generate(spec);
  EXPECT_EQ(t.stats.input_tokens.min, 1000u);
  EXPECT_EQ(t.stats.input_tokens.max, 1000u);
}

TEST(trace_synthetic, shared_prefix_groups_and_tenants) {
  synthetic_spec spec;
  spec.requests = 3000;
  spec.shared_prefix_tokens = 1100; // 2 full blocks + 76 tokens shared with the user's part
  spec.input = length_distribution::fixed(1000);
  spec.output = length_distribution::fixed(10);
  auto t = generate(spec);
  for (const auto& r : t.requests) {
    ASSERT_EQ(r.input_tokens, 2100u);
    ASSERT_EQ(r.block_ids.size(), 5u);
    ASSERT_EQ(r.block_ids[0], 0u);
    ASSERT_EQ(r.block_ids[1], 1u);
  }
  auto reuse = ideal_prefix_reuse(t);
  EXPECT_EQ(reuse.blocks, 15'000u);
  EXPECT_EQ(reuse.hit_blocks, 2u * 2999u);
  EXPECT_EQ(reuse.hit_tokens, 1024u * 2999u);
  EXPECT_EQ(t.stats.distinct_blocks, 2u + 3u * 3000u);

  spec.prefix_groups = 4;
  spec.tenants = 3;
  t = generate(spec);
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> groups; // (tenant, first id) -> requests
  for (const auto& r : t.requests) {
    ASSERT_GE(r.tenant, 1u);
    ASSERT_LE(r.tenant, 3u);
    groups[{r.tenant, r.block_ids[0]}]++;
  }
  EXPECT_EQ(groups.size(), 12u); // 4 system prompts in each of 3 tenants
  EXPECT_EQ(t.stats.tenants, 3u);
  // The first request of each (tenant, group) misses; every other hits both prefix blocks.
  EXPECT_EQ(ideal_prefix_reuse(t).hit_blocks, 2u * (3000u - 12u));
}

TEST(trace_synthetic, multi_turn_sessions_extend_the_previous_turn) {
  synthetic_spec spec;
  spec.requests = 300; // 100 sessions of 3 turns
  spec.turns_per_session = 3;
  spec.think_time_s = 5;
  spec.input = length_distribution::fixed(600);
  spec.output = length_distribution::fixed(100);
  auto t = generate(spec);
  std::map<uint64_t, std::vector<const trace_request*>> sessions;
  for (const auto& r : t.requests)
    sessions[r.session].push_back(&r);
  ASSERT_EQ(sessions.size(), 100u);
  EXPECT_EQ(sessions.count(0), 0u);
  EXPECT_EQ(t.stats.sessions, 100u);
  for (const auto& [id, turns] : sessions) {
    ASSERT_EQ(turns.size(), 3u);
    // Inputs 600, 600+100+600, 1300+100+600.
    EXPECT_EQ(turns[0]->input_tokens, 600u);
    EXPECT_EQ(turns[1]->input_tokens, 1300u);
    EXPECT_EQ(turns[2]->input_tokens, 2000u);
    for (size_t k = 1; k < 3; ++k) {
      ASSERT_LE(turns[k - 1]->arrival_s, turns[k]->arrival_s);
      size_t full = turns[k - 1]->input_tokens / 512;
      for (size_t j = 0; j < full; ++j)
        ASSERT_EQ(turns[k]->block_ids[j], turns[k - 1]->block_ids[j]);
      // The previous turn's partial last block (and its output) are new content here.
      ASSERT_NE(turns[k]->block_ids[full], turns[k - 1]->block_ids[full]);
    }
  }
  auto reuse = ideal_prefix_reuse(t);
  EXPECT_EQ(reuse.blocks, 100u * (2 + 3 + 4));
  EXPECT_EQ(reuse.hit_blocks, 100u * (1 + 2));
}

TEST(trace_synthetic, max_input_tokens_ends_sessions) {
  synthetic_spec spec;
  spec.requests = 50;
  spec.turns_per_session = 10;
  spec.input = length_distribution::fixed(1000);
  spec.output = length_distribution::fixed(1000);
  spec.max_input_tokens = 5000; // turns 1000, 3000, 5000; the 4th (7000) is not made
  auto t = generate(spec);
  ASSERT_EQ(t.requests.size(), 50u);
  std::map<uint64_t, uint64_t> turns;
  for (const auto& r : t.requests) {
    ASSERT_LE(r.input_tokens, 5000u);
    turns[r.session]++;
  }
  for (const auto& [session, count] : turns)
    EXPECT_LE(count, 3u);

  spec.input = length_distribution::fixed(9000); // a first turn is cut to the limit
  t = generate(spec);
  EXPECT_EQ(t.stats.input_tokens.max, 5000u);
}

TEST(trace_synthetic, validation) {
  auto error_of = [](synthetic_spec spec) {
    auto t = generate_synthetic(spec);
    return t ? std::string("ok") : describe(t.error());
  };
  synthetic_spec spec;
  spec.requests = 0;
  EXPECT_EQ(error_of(spec), "synthetic requests must be in 1..100000000, got 0");
  spec = {};
  spec.rate_per_s = 0;
  EXPECT_EQ(error_of(spec), "synthetic rate_per_s must be a positive number, got 0");
  spec = {};
  spec.input = length_distribution::uniform(10, 5);
  EXPECT_EQ(error_of(spec), "synthetic input: min 10 is above max 5");
  spec = {};
  spec.output = length_distribution::lognormal(-1, 1);
  EXPECT_EQ(error_of(spec), "synthetic output: lognormal mean must be in (0, 16777216], got -1");
  spec = {};
  spec.turns_per_session = 0;
  EXPECT_EQ(error_of(spec), "synthetic turns_per_session must be at least 1, got 0");
}

TEST(trace_synthetic, toml_spec) {
  auto spec = parse(R"(
[sim.synthetic]
requests = 500
rate_per_s = 2.5
input = { dist = "lognormal", mean = 2048, sigma = 0.7, max = 32768 }
output = 128
shared_prefix_tokens = 1024
prefix_groups = 4
turns_per_session = 3
think_time_s = 20.0
seed = 7
tenants = 2
block_tokens = 256
max_input_tokens = 65536
)");
  ASSERT_TRUE(spec) << describe(spec.error());
  EXPECT_EQ(spec->requests, 500u);
  EXPECT_EQ(spec->rate_per_s, 2.5);
  EXPECT_EQ(spec->input.dist, length_distribution::shape::lognormal);
  EXPECT_EQ(spec->input.mean, 2048);
  EXPECT_EQ(spec->input.sigma, 0.7);
  EXPECT_EQ(spec->input.min, 1u);
  EXPECT_EQ(spec->input.max, 32768u);
  EXPECT_EQ(spec->output.dist, length_distribution::shape::fixed);
  EXPECT_EQ(spec->output.value, 128u);
  EXPECT_EQ(spec->shared_prefix_tokens, 1024u);
  EXPECT_EQ(spec->prefix_groups, 4u);
  EXPECT_EQ(spec->turns_per_session, 3u);
  EXPECT_EQ(spec->think_time_s, 20.0);
  EXPECT_EQ(spec->seed, 7u);
  EXPECT_EQ(spec->tenants, 2u);
  EXPECT_EQ(spec->block_tokens, 256u);
  EXPECT_EQ(spec->max_input_tokens, 65536u);
  EXPECT_TRUE(generate_synthetic(*spec));

  auto uniform = parse("[sim.synthetic]\ninput = { dist = \"uniform\", min = 10, max = 20 }\n");
  ASSERT_TRUE(uniform) << describe(uniform.error());
  EXPECT_EQ(uniform->input.dist, length_distribution::shape::uniform);
  EXPECT_EQ(uniform->input.min, 10u);
  EXPECT_EQ(uniform->input.max, 20u);
  EXPECT_EQ(uniform->output.dist, length_distribution::shape::lognormal); // the default
  auto fixed = parse("[sim.synthetic]\noutput = { dist = \"fixed\", value = 3 }\n");
  ASSERT_TRUE(fixed) << describe(fixed.error());
  EXPECT_EQ(fixed->output.value, 3u);
}

TEST(trace_synthetic, toml_errors_are_located) {
  EXPECT_EQ(parse_error("[sim.synthetic]\nrequests = 5\nrate_per_sec = 2\n"),
            "run.toml:3:16: [sim.synthetic] unknown key 'rate_per_sec' (did you mean 'rate_per_s'?); known keys: "
            "requests, rate_per_s, input, output, shared_prefix_tokens, prefix_groups, turns_per_session, "
            "think_time_s, seed, tenants, block_tokens, max_input_tokens");
  EXPECT_EQ(parse_error("[sim.synthetic]\nrequests = -5\n"),
            "run.toml:2:12: [sim.synthetic] requests: expected an integer in 1..100000000, got -5");
  EXPECT_EQ(parse_error("[sim.synthetic]\ninput = { dist = \"lognorm\", mean = 5 }\n"),
            "run.toml:2:18: [sim.synthetic.input] dist: expected one of fixed, uniform, lognormal, got \"lognorm\" "
            "(did you mean \"lognormal\"?)");
  EXPECT_EQ(parse_error("[sim.synthetic]\ninput = { dist = \"uniform\", min = 50, max = 10 }\n"),
            "run.toml:2:45: [sim.synthetic.input] max: expected max >= min (50), got 10");
  EXPECT_EQ(parse_error("[sim.synthetic]\ninput = { dist = \"lognormal\", sigma = 1 }\n"),
            "run.toml:2:9: [sim.synthetic.input] mean: missing; a lognormal distribution needs it");
  EXPECT_EQ(parse_error("[sim.synthetic]\ninput = { mean = 5 }\n"),
            "run.toml:2:9: [sim.synthetic.input] dist: missing; expected \"fixed\", \"uniform\" or \"lognormal\"");
  EXPECT_EQ(parse_error("[sim.synthetic]\noutput = { dist = \"fixed\", value = 5, mean = 3 }\n"),
            "run.toml:2:46: [sim.synthetic.output] unknown key 'mean'; known keys: dist, value");
  EXPECT_EQ(parse_error("[sim.synthetic]\noutput = \"long\"\n"),
            "run.toml:2:10: [sim.synthetic] output: expected a table, got the string \"long\"");
}
