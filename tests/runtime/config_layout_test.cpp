// The parts config was split into agree with each other: the HBM budget
// `kvtier calc` prints is the one a config gets, and the hardware profile
// writer writes what the reader reads back.

#include "runtime/capacity_plan.hpp"
#include "runtime/config.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/model_presets.hpp"

#include <gtest/gtest.h>

using namespace kvtier;

TEST(config_layout, calc_and_config_share_one_hbm_budget) {
  auto cfg = parse_config("[model]\npreset = \"llama-3-70b\"\nweights_dtype = \"fp8\"\n", "exp.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  capacity_query q;
  q.geometry = cfg->geometry;
  q.context_tokens = 1024;
  q.hbm_bytes = cfg->hardware.gpu.hbm_bytes;
  q.weights_dtype = cfg->weights_dtype;
  q.reserved_bytes = cfg->hardware.gpu.reserved_bytes;
  auto plan = plan_capacity(q);
  // 141 GB - 70.6 GB of fp8 weights - 4 GB reserve.
  EXPECT_EQ(plan.kv_budget_bytes, 66'400'000'000u);
  EXPECT_EQ(cfg->hbm_kv_bytes(), plan.kv_budget_bytes);
  EXPECT_EQ(cfg->weight_bytes(), plan.weight_bytes);
  EXPECT_EQ(hbm_kv_budget(10, 8, 3), 0u);
}

TEST(config_layout, hardware_profile_round_trips_through_its_writer) {
  hardware_profile hw;
  hw.name = "bench";
  hw.gpu.hbm_bytes = 80'000'000'000;
  hw.pcie.h2d.gbps = 25.5;
  hw.pcie.d2h.per_op_us = 0.75;
  hw.nvme.queue_depth = 128;
  auto text = hardware_profile_toml(hw, "written by a test");
  EXPECT_EQ(text.substr(0, 20), "# written by a test\n");
  auto back = parse_hardware_profile(text, "round.toml");
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->name, "bench");
  EXPECT_EQ(back->gpu.hbm_bytes, 80'000'000'000u);
  EXPECT_DOUBLE_EQ(back->pcie.h2d.gbps, 25.5);
  EXPECT_DOUBLE_EQ(back->pcie.d2h.per_op_us, 0.75);
  EXPECT_EQ(back->nvme.queue_depth, 128u);
  nvme_profile measured;
  measured.read_iops = 123456;
  measured.queue_depth = 4;
  auto nvme = parse_hardware_profile(nvme_device_toml(measured), "nvme.toml");
  ASSERT_TRUE(nvme) << describe(nvme.error());
  EXPECT_EQ(nvme->nvme.read_iops, 123456);
  EXPECT_EQ(nvme->nvme.queue_depth, 4u);
}
