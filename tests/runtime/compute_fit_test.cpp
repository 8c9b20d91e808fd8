// The calibrated compute model: a fit recovers the parameters that made its
// samples, the profile's [compute] table round-trips and is checked, and the
// cost model uses it for the model it was measured with only.

#include "runtime/compute_fit.hpp"
#include "runtime/config.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/error.hpp"
#include "runtime/hardware_profile.hpp"

#include <gtest/gtest.h>

#include <cmath>

using namespace kvtier;

namespace {

measured_compute truth() {
  measured_compute c;
  c.model = "llama-3-8b";
  c.dense_tokens = {1, 32, 256, 2048};
  c.dense_ms = {6.0, 6.5, 9.0, 50.0};
  c.decode_attention_gbps = 3500;
  c.prefill_attention_tflops = 250;
  c.mixed_decode_attention_gbps = 1200;
  return c;
}

std::vector<compute_sample> samples_of(const measured_compute& c) {
  std::vector<compute_sample> out;
  auto add = [&](uint64_t tokens, bool decode_only, double kv_bytes, double flops) {
    compute_sample s{tokens, decode_only, kv_bytes, flops, 0};
    s.seconds = predict_seconds(c, s);
    out.push_back(s);
  };
  for (uint64_t n : {1, 8, 32, 128, 256})
    add(n, true, 0, 0);
  for (uint64_t n : {32, 256, 2048, 4096})
    add(n, false, 0, 0);
  add(8, true, 8e9, 0);
  add(32, true, 2e10, 0);
  add(512, false, 0, 3e13);
  add(2048, false, 0, 2e14);
  add(544, false, 4e9, 3e13); // a chunk and 32 decode rows
  add(2112, false, 1e10, 2e14);
  return out;
}

} // namespace

// Dense is piecewise linear: flat below the first knot, the last segment's
// slope beyond the last; attention adds per its kind.
TEST(compute_fit, predicts_by_knots_and_attention_kind) {
  auto c = truth();
  EXPECT_DOUBLE_EQ(dense_seconds(c, 0.5), 6.0e-3);
  EXPECT_NEAR(dense_seconds(c, 144), 7.75e-3, 1e-12);
  EXPECT_NEAR(dense_seconds(c, 4096), (50 + 2048.0 * 41 / 1792) * 1e-3, 1e-12);  // 256..2048 slope, extended
  EXPECT_NEAR(predict_seconds(c, {1, true, 3.5e9, 1e15}), 7.0e-3, 1e-12);        // decode: KV bytes only
  EXPECT_NEAR(predict_seconds(c, {256, false, 0, 2.5e13}), 109.0e-3, 1e-12);     // a chunk: FLOPs
  EXPECT_NEAR(predict_seconds(c, {256, false, 1.2e9, 2.5e13}), 110.0e-3, 1e-12); // and decode rows' KV beside it
}

TEST(compute_fit, recovers_the_parameters_that_made_the_samples) {
  auto c = truth();
  auto samples = samples_of(c);
  compute_fit_report report;
  auto fit = fit_compute(samples, c.dense_tokens, "llama-3-8b", &report);
  ASSERT_TRUE(fit) << describe(fit.error());
  EXPECT_EQ(fit->model, "llama-3-8b");
  ASSERT_EQ(fit->dense_ms.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(fit->dense_ms[i], c.dense_ms[i], 1e-6) << "knot " << i;
  EXPECT_NEAR(fit->decode_attention_gbps, 3500, 1e-3);
  EXPECT_NEAR(fit->prefill_attention_tflops, 250, 1e-4);
  EXPECT_NEAR(fit->mixed_decode_attention_gbps, 1200, 1e-3);
  EXPECT_LT(report.max_relative_error, 1e-9);
  EXPECT_EQ(report.note, "");
  // Noise on one sample shows in the report: the fit can fail to explain.
  samples[3].seconds *= 1.2;
  ASSERT_TRUE(fit_compute(samples, c.dense_tokens, "llama-3-8b", &report));
  EXPECT_GT(report.max_relative_error, 0.05);
}

// Samples whose prefill steps get faster with more attention: that rate is
// dropped, said so, and the rest still fits.
TEST(compute_fit, a_negative_rate_is_dropped_and_said) {
  auto c = truth();
  c.prefill_attention_tflops = 0;
  auto samples = samples_of(c);
  samples[samples.size() - 3].seconds *= 0.5; // the 2048-token chunk with the most attention
  compute_fit_report report;
  auto fit = fit_compute(samples, c.dense_tokens, "m", &report);
  ASSERT_TRUE(fit) << describe(fit.error());
  EXPECT_EQ(fit->prefill_attention_tflops, 0);
  EXPECT_NE(report.note.find("prefill attention came out non-positive"), std::string::npos) << report.note;
}

TEST(compute_fit, refuses_what_cannot_be_fitted) {
  auto samples = samples_of(truth());
  EXPECT_FALSE(fit_compute(samples, {32, 1}, "m")); // not ascending
  EXPECT_FALSE(fit_compute(std::span(samples).first(3), {1, 32, 256, 2048}, "m"));
  auto err = fit_compute(samples, {1, 32, 256, 2048, 100000, 200000}, "m"); // knots no sample informs
  ASSERT_FALSE(err);
  EXPECT_NE(describe(err.error()).find("no sample informs"), std::string::npos) << describe(err.error());
}

TEST(compute_fit, profile_table_round_trips_and_is_checked) {
  hardware_profile hw;
  hw.compute = truth();
  auto back = parse_hardware_profile(hardware_profile_toml(hw, "test"), "cal.toml");
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->compute.model, "llama-3-8b");
  EXPECT_EQ(back->compute.dense_tokens, hw.compute.dense_tokens);
  EXPECT_EQ(back->compute.dense_ms, hw.compute.dense_ms);
  EXPECT_DOUBLE_EQ(back->compute.decode_attention_gbps, 3500);
  EXPECT_DOUBLE_EQ(back->compute.prefill_attention_tflops, 250);
  EXPECT_DOUBLE_EQ(back->compute.mixed_decode_attention_gbps, 1200);
  auto bad = parse_hardware_profile("[compute]\nmodel = \"m\"\ndense_tokens = [1, 8]\ndense_ms = [1.0]\n", "bad.toml");
  ASSERT_FALSE(bad);
  EXPECT_NE(describe(bad.error()).find("bad.toml:1"), std::string::npos) << describe(bad.error());
  EXPECT_NE(describe(bad.error()).find("equal non-zero length"), std::string::npos) << describe(bad.error());
  auto unsorted =
      parse_hardware_profile("[compute]\nmodel = \"m\"\ndense_tokens = [8, 1]\ndense_ms = [1.0, 2.0]\n", "bad.toml");
  ASSERT_FALSE(unsorted);
  EXPECT_NE(describe(unsorted.error()).find("bad.toml:3"), std::string::npos) << describe(unsorted.error());
  EXPECT_NE(describe(unsorted.error()).find("[compute] dense_tokens"), std::string::npos);
  auto text =
      parse_hardware_profile("[compute]\nmodel = \"m\"\ndense_tokens = [1, \"x\"]\ndense_ms = [1, 2]\n", "b.toml");
  ASSERT_FALSE(text);
  EXPECT_NE(describe(text.error()).find("item 1"), std::string::npos) << describe(text.error());
}

// The cost model takes the measured forward for its model, the roofline otherwise.
TEST(compute_fit, cost_model_uses_the_measurement_of_its_model_only) {
  auto cfg = parse_config("[model]\npreset = \"llama-3-8b\"\n", "c.toml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  cost_model roofline(*cfg);
  EXPECT_FALSE(roofline.calibrated());
  EXPECT_EQ(roofline.compute_model(), "roofline");
  cfg->hardware.compute = truth();
  cost_model measured(*cfg);
  ASSERT_TRUE(measured.calibrated());
  EXPECT_EQ(measured.compute_model(), "measured forward (llama-3-8b)");
  step_shape decode;
  for (int i = 0; i < 32; ++i)
    decode.add(1, 4095); // 32 x 4096 tokens of KV read
  ASSERT_TRUE(decode.decode_only());
  const double kv = 32.0 * 4096 * 131072; // bytes per token of Llama-3-8B in bf16
  EXPECT_NEAR(measured.step_seconds(decode), 6.5e-3 + kv / 3500e9, 1e-12);
  step_shape prefill;
  prefill.add(512, 0);
  ASSERT_FALSE(prefill.decode_only());
  const double flops = 4.0 * 32 * 32 * 128 * (512.0 * 513 / 2);
  EXPECT_NEAR(measured.step_seconds(prefill), dense_seconds(truth(), 512) + flops / 250e12, 1e-12);
  prefill.add(1, 1023); // a decode row beside the chunk: its 1,024 tokens of KV at the mixed rate
  EXPECT_NEAR(measured.step_seconds(prefill), dense_seconds(truth(), 513) + flops / 250e12 + 1024.0 * 131072 / 1200e9,
              1e-12);
  cfg->hardware.compute.model = "llama-3-70b";
  EXPECT_FALSE(cost_model(*cfg).calibrated());
}
