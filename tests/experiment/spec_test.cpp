// experiment_spec: the sweep's points, their configs, and located errors.

#include "experiment/experiment_spec.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kvtier::experiment {
namespace {

class spec_file : public ::testing::Test {
protected:
  std::string write(const std::string& name, const std::string& text) {
    auto path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
        ("kvtier_spec_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(spec_file, cartesian_points_vary_the_first_key_slowest) {
  auto path = write("s.toml", R"([base.sim]
max_requests = 10
[sweep]
"tiers.hbm.capacity" = ["4GB", "8GB"]
cache.policy = ["lru", "arc", "s3fifo"]
)");
  auto spec = load_experiment(path);
  ASSERT_TRUE(spec) << describe(spec.error());
  ASSERT_EQ(spec->axes.size(), 2u);
  EXPECT_EQ(spec->axes[0].key, "tiers.hbm.capacity");
  EXPECT_EQ(spec->axes[1].key, "cache.policy");
  ASSERT_EQ(spec->points.size(), 6u);
  EXPECT_EQ(spec->points[0].label, "capacity=4GB policy=lru");
  EXPECT_EQ(spec->points[2].label, "capacity=4GB policy=s3fifo");
  EXPECT_EQ(spec->points[3].label, "capacity=8GB policy=lru");
  EXPECT_EQ(spec->name, "s");
  auto cfg = config_of_point(*spec, spec->points[4]);
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->hbm_kv_bytes(), 8'000'000'000u);
  EXPECT_EQ(cfg->cache.policy, eviction_policy::arc);
  EXPECT_EQ(cfg->sim.max_requests, 10u);
  // Fingerprints: distinct per point, the same when read again.
  auto again = load_experiment(path);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(spec->points[i].fingerprint, again->points[i].fingerprint);
    EXPECT_EQ(spec->points[i].fingerprint.size(), 16u);
    for (size_t j = 0; j < i; ++j)
      EXPECT_NE(spec->points[i].fingerprint, spec->points[j].fingerprint);
  }
}

TEST_F(spec_file, zip_labels_seeds_and_zipped_groups) {
  auto path = write("z.toml", R"([base.sim]
trace_format = "synthetic"
[base.sim.synthetic]
requests = 5
[sweep]
zip = [["sim.synthetic.input", "sim.synthetic.output"]]
"sim.synthetic.input" = [100, 200]
"sim.synthetic.output" = [10, 20]
"scheduler.preemption" = ["swap", "recompute"]
seeds = [7, 8]
)");
  auto spec = load_experiment(path);
  ASSERT_TRUE(spec) << describe(spec.error());
  ASSERT_EQ(spec->points.size(), 8u); // 2 (zipped) x 2 x 2 seeds
  EXPECT_EQ(spec->points[0].label, "input=100 output=10 preemption=swap seed=7");
  EXPECT_EQ(spec->points[1].label, "input=100 output=10 preemption=swap seed=8");
  EXPECT_EQ(spec->points[7].label, "input=200 output=20 preemption=recompute seed=8");
  auto cfg = config_of_point(*spec, spec->points[7]);
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->sim.synthetic->seed, 8u);
  EXPECT_EQ(cfg->sim.synthetic->input.value, 200u);
  EXPECT_EQ(cfg->sim.synthetic->output.value, 20u);
  EXPECT_EQ(cfg->scheduler.preemption, preemption_mode::recompute);

  auto zipped = load_experiment(write("zz.toml", R"([sweep]
combine = "zip"
labels = ["small", "large"]
"tiers.hbm.capacity" = ["4GB", "8GB"]
"cache.block_tokens" = [16, 32]
)"));
  ASSERT_TRUE(zipped) << describe(zipped.error());
  ASSERT_EQ(zipped->points.size(), 2u);
  EXPECT_EQ(zipped->points[1].label, "large");
  EXPECT_EQ(config_of_point(*zipped, zipped->points[1])->cache.block_tokens, 32u);
}

TEST_F(spec_file, an_unknown_swept_key_is_located_at_its_value) {
  auto path = write("u.toml", "[sweep]\n\"tiers.hbm.capacty\" = [\"4GB\"]\n");
  auto spec = load_experiment(path);
  ASSERT_FALSE(spec);
  auto text = describe(spec.error());
  EXPECT_EQ(text.rfind(path + ":2:24: [tiers.hbm] unknown key 'capacty' (did you mean 'capacity'?)", 0), 0u) << text;
  EXPECT_NE(text.find("(in the sweep's point 0: capacty=4GB)"), std::string::npos) << text;
}

TEST_F(spec_file, bad_values_and_shapes_are_located) {
  auto bad_value = write("v.toml", "[sweep]\ncache.block_tokens = [16, 0]\n");
  auto spec = load_experiment(bad_value);
  ASSERT_FALSE(spec);
  EXPECT_EQ(describe(spec.error()).rfind(bad_value + ":2:27: [cache] block_tokens:", 0), 0u) << describe(spec.error());

  auto mismatch = write("m.toml", "[sweep]\ncombine = \"zip\"\na.b = [1, 2]\nc.d = [1]\n");
  spec = load_experiment(mismatch);
  ASSERT_FALSE(spec);
  EXPECT_EQ(describe(spec.error()), mismatch + ":4:7: [sweep] c.d: zipped with a.b, expected 2 values, got 1");

  auto not_list = write("n.toml", "[sweep]\n\"cache.policy\" = \"lru\"\n");
  spec = load_experiment(not_list);
  ASSERT_FALSE(spec);
  EXPECT_EQ(describe(spec.error()),
            not_list + ":2:18: [sweep] cache.policy: expected a non-empty list of the values to sweep, got lru");

  auto unknown_table = write("t.toml", "[experiment]\nmode = \"fast\"\n");
  spec = load_experiment(unknown_table);
  ASSERT_FALSE(spec);
  EXPECT_NE(describe(spec.error()).find(unknown_table + ":2:8: [experiment] mode"), std::string::npos)
      << describe(spec.error());
}

TEST_F(spec_file, a_base_file_keeps_its_own_locations) {
  write("base.toml", "[cache]\nblock_tokens = 16\npolicy = \"lru\"\n");
  auto path = write("b.toml",
                    "[experiment]\nbase = \"base.toml\"\n[base.cache]\nblock_tokens = 32\n"
                    "[sweep]\n\"cache.policy\" = [\"arc\", \"nope\"]\n");
  auto spec = load_experiment(path);
  ASSERT_FALSE(spec);
  EXPECT_EQ(describe(spec.error()).rfind(path + ":6:26: [cache] policy:", 0), 0u) << describe(spec.error());

  write("bad_base.toml", "[cache]\nblock_tokens = 0\n");
  auto path2 = write("c.toml", "[experiment]\nbase = \"bad_base.toml\"\n");
  spec = load_experiment(path2);
  ASSERT_FALSE(spec);
  EXPECT_EQ(describe(spec.error()).rfind((dir_ / "bad_base.toml").string() + ":2:16: [cache] block_tokens:", 0), 0u)
      << describe(spec.error());
}

} // namespace
} // namespace kvtier::experiment
