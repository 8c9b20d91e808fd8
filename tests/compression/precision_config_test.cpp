#include "compression/precision_config.hpp"
#include "runtime/error.hpp"
#include "runtime/toml_reader.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using kvtier::quant::scheme;

TEST(precision_config, int4_means_kivi_and_layers_stay_fp16) {
  auto t = parse_toml("key_dtype = \"int4\"\nvalue_dtype = \"fp8\"\nfp16_first_layers = 2\nfp16_last_layers = 1\n",
                      "plan.toml");
  ASSERT_TRUE(t);
  auto plan = compression::read_precision_plan(*t, "plan.toml", "quant.plan");
  ASSERT_TRUE(plan) << describe(plan.error());
  EXPECT_EQ(plan->key_scheme, scheme::int4_channel);
  EXPECT_EQ(plan->value_scheme, scheme::fp8_token);
  EXPECT_EQ(plan->key_scheme_for(1, 32), std::nullopt);
  EXPECT_EQ(plan->key_scheme_for(2, 32), scheme::int4_channel);
  EXPECT_EQ(plan->value_scheme_for(31, 32), std::nullopt);
  EXPECT_EQ(plan->residual_tokens, 32u);
}

TEST(precision_config, errors_name_the_place_and_the_key) {
  auto t = parse_toml("key_dtype = \"int3\"\n", "plan.toml");
  ASSERT_TRUE(t);
  auto plan = compression::read_precision_plan(*t, "plan.toml", "quant.plan");
  ASSERT_FALSE(plan);
  EXPECT_TRUE(is(plan.error(), errc::invalid_config));
  auto text = describe(plan.error());
  EXPECT_NE(text.find("plan.toml:1:"), std::string::npos) << text;
  EXPECT_NE(text.find("key_dtype"), std::string::npos) << text;
  auto u = parse_toml("fp16_frist_layers = 2\n", "plan.toml");
  auto unknown = compression::read_precision_plan(*u, "plan.toml", "quant.plan");
  ASSERT_FALSE(unknown);
  EXPECT_NE(describe(unknown.error()).find("fp16_first_layers"), std::string::npos);
}
