#include "compression/compaction.hpp"
#include "compression/sim_model.hpp"
#include "runtime/model_presets.hpp"

#include <gtest/gtest.h>

using namespace kvtier::compression;

TEST(compaction, frees_the_tail_blocks_and_packs_each_slice) {
  std::vector<std::vector<uint32_t>> kept{
      {0, 5, 17, 39},
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39},
  };
  auto plan = plan_compaction(kept, 40, 16);
  EXPECT_EQ(plan.tokens_after, 20u);
  EXPECT_EQ(plan.blocks_before, 3u);
  EXPECT_EQ(plan.blocks_after, 2u);
  EXPECT_EQ(plan.freed_blocks, (std::vector<uint64_t>{2}));
  EXPECT_EQ(plan.padding, 16u);
  ASSERT_EQ(plan.moves.size(), 13u);
  EXPECT_EQ(plan.moves[0].slice, 0u);
  EXPECT_EQ(plan.moves[0].from, 5u);
  EXPECT_EQ(plan.moves[0].to, 1u);
  EXPECT_EQ(plan.moves[2].from, 39u);
  EXPECT_EQ(plan.moves[2].to, 3u);
  EXPECT_EQ(plan.moves[3].slice, 1u);
  EXPECT_EQ(plan.moves[3].from, 30u);
  EXPECT_EQ(plan.moves[3].to, 10u);
  for (const auto& m : plan.moves)
    EXPECT_LT(m.to, m.from);
}

TEST(compaction, freed_blocks_come_tail_first) {
  std::vector<std::vector<uint32_t>> kept{{0, 1, 2}};
  auto plan = plan_compaction(kept, 64, 16);
  EXPECT_EQ(plan.freed_blocks, (std::vector<uint64_t>{3, 2, 1}));
  EXPECT_TRUE(plan.moves.empty());
}

TEST(sim_model, footprint_of_a_compressed_request) {
  kvtier::kv_geometry g{*kvtier::find_model_preset("llama-3-8b"), kvtier::kv_dtype::fp16, 16};
  sim_policy p;
  p.budget.ratio = 0.2;
  p.budget.min_tokens = 36;
  auto f = compressed_footprint(1000, p, g, kvtier::kv_dtype::fp8);
  EXPECT_EQ(f.tokens_kept, 200u);
  EXPECT_EQ(f.blocks_before, 63u);
  EXPECT_EQ(f.blocks_kept, 13u);
  EXPECT_EQ(f.blocks_freed, 50u);
  EXPECT_EQ(f.hbm_bytes, 13u * 2'097'152);
  // fp8 with one fp16 scale per 128-element vector: 130/256 of the fp16 bytes.
  EXPECT_EQ(f.offload_bytes, 13u * 16 * 2 * 32 * 8 * 130);
  auto small = compressed_footprint(20, p, g);
  EXPECT_EQ(small.tokens_kept, 20u);
  EXPECT_EQ(small.blocks_freed, 0u);
}
