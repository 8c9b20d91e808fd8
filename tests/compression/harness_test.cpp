#include "compression/harness.hpp"
#include "compression/sim_model.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace kvtier::compression;

namespace {
eval_config tiny() {
  eval_config c;
  synthetic_config m;
  m.tokens = 192;
  m.future_queries = 8;
  m.head_dim = 32;
  m.layers = 1;
  m.kv_heads = 1;
  m.group = 2;
  c.scenarios = default_scenarios(m);
  c.policies = {"h2o_raw", "h2o", "snapkv"};
  c.budgets = {0.2};
  c.settings.recent = 16;
  c.settings.window = 16;
  c.quant_formats = {"fp16", "int8_token", "int4_kivi"};
  return c;
}

const eviction_row& row(const scenario_report& s, const std::string& policy) {
  for (const auto& r : s.rows)
    if (r.policy == policy)
      return r;
  throw std::runtime_error("no row " + policy);
}
} // namespace

TEST(harness, baselines_bound_the_gap) {
  auto report = run_eval(tiny());
  ASSERT_TRUE(report) << kvtier::describe(report.error());
  ASSERT_EQ(report->scenarios.size(), 5u);
  const auto& s = report->scenarios[0];
  EXPECT_EQ(s.name, "structured");
  EXPECT_EQ(row(s, "full").m.out_err, 0.0);
  EXPECT_EQ(row(s, "random").gap_mass, 0.0);
  EXPECT_EQ(row(s, "oracle").gap_mass, 1.0);
  for (const auto& r : s.rows) {
    if (r.policy != "full") {
      EXPECT_LE(r.m.mass, row(s, "oracle").m.mass + 1e-12) << r.policy;
    }
  }
  // Every policy row exists: the three asked for and the three always run.
  for (auto p : {"random", "streaming_llm", "h2o_raw", "h2o", "snapkv", "oracle"})
    EXPECT_NO_THROW(row(s, p));
}

TEST(harness, visible_needles_are_found_hidden_ones_are_not) {
  auto report = run_eval(tiny());
  ASSERT_TRUE(report);
  const auto& visible = report->scenarios[1];
  const auto& hidden = report->scenarios[2];
  EXPECT_EQ(row(visible, "snapkv").m.needle, 1.0);
  EXPECT_EQ(row(visible, "h2o").m.needle, 1.0);
  EXPECT_EQ(row(hidden, "oracle").m.needle, 1.0);
  EXPECT_LT(row(hidden, "snapkv").m.needle, 1.0);
  EXPECT_TRUE(std::isnan(row(report->scenarios[3], "h2o").gap_mass)); // high entropy: nothing to find
}

TEST(harness, quantizers_order_by_bits) {
  auto report = run_eval(tiny());
  ASSERT_TRUE(report);
  const auto& q = report->scenarios[0].quant;
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[0].key_mse, 0.0);
  EXPECT_EQ(q[0].bytes_ratio, 1.0);
  EXPECT_LT(q[1].key_mse, q[2].key_mse);
  EXPECT_GT(q[1].bytes_ratio, q[2].bytes_ratio);
}

TEST(harness, refuses_unknown_policies_formats_and_budgets) {
  auto c = tiny();
  c.policies = {"h2"};
  EXPECT_TRUE(kvtier::is(run_eval(c).error(), kvtier::errc::invalid_argument));
  c = tiny();
  c.quant_formats = {"int3"};
  EXPECT_TRUE(kvtier::is(run_eval(c).error(), kvtier::errc::invalid_argument));
  c = tiny();
  c.scenarios[0].model.head_dim = 6; // 2 + group 2 + 2 outlier channels leave no content channel
  auto small = run_eval(c);
  ASSERT_FALSE(small);
  EXPECT_NE(kvtier::describe(small.error()).find("scenario 'structured'"), std::string::npos);
  c = tiny();
  c.scenarios[0].model.head_dim = 48; // int4_kivi's values need 32-channel groups
  EXPECT_TRUE(kvtier::is(run_eval(c).error(), kvtier::errc::invalid_argument));
  c = tiny();
  c.budgets = {0.0};
  EXPECT_TRUE(kvtier::is(run_eval(c).error(), kvtier::errc::invalid_argument));
}

TEST(sim_model, modeled_quality_orders_policies) {
  auto m = small_model();
  m.tokens = 192;
  m.head_dim = 32;
  auto oracle = modeled_quality("oracle", 0.2, m);
  auto random = modeled_quality("random", 0.2, m);
  ASSERT_TRUE(oracle && random);
  EXPECT_GT(oracle->mass, random->mass);
  EXPECT_FALSE(modeled_quality("nope", 0.2, m));
}
