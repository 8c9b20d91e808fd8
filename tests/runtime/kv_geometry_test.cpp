#include "runtime/capacity_plan.hpp"
#include "runtime/kv_geometry.hpp"
#include "runtime/model_presets.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

namespace {
kv_geometry geometry(const char* model, kv_dtype dtype, uint32_t block_tokens = 16) {
  return kv_geometry{*find_model_preset(model), dtype, block_tokens};
}
} // namespace

TEST(kv_geometry, llama3_70b_fp16_is_327680_bytes_per_token) {
  auto g = geometry("llama-3-70b", kv_dtype::fp16);
  EXPECT_EQ(g.bytes_per_token(), 327'680u); // 2 * 80 * 8 * 128 * 2
  EXPECT_EQ(g.bytes_per_block(), 327'680u * 16);
  EXPECT_EQ(g.bytes_per_block_layer(), 4'096u * 16);
  EXPECT_EQ(g.bytes_for_context(131'072), 42'949'672'960u);
}

TEST(kv_geometry, multi_head_70b_is_eight_times_gqa) {
  auto g = geometry("mha-70b", kv_dtype::fp16);
  EXPECT_EQ(g.bytes_per_token(), 2'621'440u); // 2 * 80 * 64 * 128 * 2
  EXPECT_EQ(g.bytes_per_token() * 100'000, 262'144'000'000u);
}

TEST(kv_geometry, llama3_8b_block_is_2_mib_at_16_tokens) {
  auto g = geometry("llama-3-8b", kv_dtype::bf16);
  EXPECT_EQ(g.bytes_per_token(), 131'072u);
  EXPECT_EQ(g.bytes_per_block(), 2u << 20);
}

TEST(kv_geometry, quantized_dtypes_include_scales) {
  // fp8/int8: 128 bytes + one fp16 scale per head vector.
  EXPECT_EQ(geometry("llama-3-70b", kv_dtype::fp8).bytes_per_token(), 2u * 80 * 8 * (128 + 2));
  EXPECT_EQ(geometry("llama-3-70b", kv_dtype::int8).bytes_per_token(), 2u * 80 * 8 * (128 + 2));
  // int4: 64 bytes + (scale + zero) fp16 per 32 elements = 4 groups * 4 bytes.
  EXPECT_EQ(geometry("llama-3-70b", kv_dtype::int4).bytes_per_token(), 2u * 80 * 8 * (64 + 16));
}

TEST(kv_geometry, mqa_uses_one_kv_head) {
  auto g = geometry("falcon-7b", kv_dtype::fp16);
  EXPECT_EQ(g.bytes_per_token(), 2u * 32 * 1 * 64 * 2);
}

TEST(kv_geometry, blocks_round_up) {
  auto g = geometry("llama-3-8b", kv_dtype::fp16, 16);
  EXPECT_EQ(g.blocks_for(0), 0u);
  EXPECT_EQ(g.blocks_for(1), 1u);
  EXPECT_EQ(g.blocks_for(16), 1u);
  EXPECT_EQ(g.blocks_for(17), 2u);
}

TEST(capacity_plan, seventy_b_fp8_weights_on_h200) {
  capacity_query q{geometry("llama-3-70b", kv_dtype::fp16), 131'072, 141'000'000'000, kv_dtype::fp8, 0};
  auto p = plan_capacity(q);
  EXPECT_EQ(p.weight_bytes, 70'600'000'000u);
  EXPECT_EQ(p.kv_budget_bytes, 70'400'000'000u);
  EXPECT_EQ(p.requests_that_fit, 1u);
  EXPECT_EQ(p.tokens_that_fit, (70'400'000'000u / 5'242'880u) * 16);
}

TEST(capacity_plan, weights_larger_than_gpu_fit_nothing) {
  capacity_query q{geometry("llama-3-405b", kv_dtype::fp16), 8192, 141'000'000'000, kv_dtype::bf16, 0};
  auto p = plan_capacity(q);
  EXPECT_EQ(p.kv_budget_bytes, 0u);
  EXPECT_EQ(p.requests_that_fit, 0u);
}
