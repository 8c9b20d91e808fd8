// The CPU twin of the quantizers: conversions bit for bit, exact small cases
// worked by hand, byte layouts against kvtier calc's math, error bounds.

#include "kernels/quant/block_codec.hpp"
#include "kernels/quant/fp8_e4m3.hpp"
#include "kernels/quant/half.hpp"
#include "kernels/quant/offload_codec.hpp"
#include "kernels/quant/outliers.hpp"
#include "kernels/quant/precision_plan.hpp"
#include "kernels/quant/quant_cpu.hpp"
#include "runtime/dtype.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace kvtier::quant;

namespace {

std::vector<uint16_t> halves(std::initializer_list<float> values) {
  std::vector<uint16_t> out;
  for (float v : values)
    out.push_back(float_to_half_rn(v));
  return out;
}

// `n` zeros as fp16 but for the values `at` names (index, value).
std::vector<uint16_t> sparse_halves(size_t n, std::initializer_list<std::pair<size_t, float>> at) {
  std::vector<uint16_t> out(n, float_to_half_rn(0.0f));
  for (auto [i, v] : at)
    out[i] = float_to_half_rn(v);
  return out;
}

std::vector<float> floats(const std::vector<uint16_t>& h) {
  std::vector<float> out;
  for (auto v : h)
    out.push_back(half_to_float(v));
  return out;
}

// Normal(0, 1) keys with two outlier channels (3 and 17) at +-20.
std::vector<uint16_t> random_keys(uint32_t rows, uint32_t channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<uint16_t> x(uint64_t{rows} * channels);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < channels; ++c) {
      float v = n(rng);
      if (c == 3 || c == 17)
        v = 20.0f + v;
      x[uint64_t{r} * channels + c] = float_to_half_rn(v);
    }
  return x;
}

std::vector<uint16_t> round_trip(scheme s, const tile_shape& shape, const std::vector<uint16_t>& in,
                                 std::vector<uint8_t>* packed_out = nullptr) {
  std::vector<uint8_t> packed(packed_bytes(s, shape));
  std::vector<uint16_t> out(in.size());
  quantize(s, shape, in.data(), packed.data());
  dequantize(s, shape, packed.data(), out.data());
  if (packed_out)
    *packed_out = packed;
  return out;
}

uint16_t half_at(const std::vector<uint8_t>& p, uint64_t offset) {
  return static_cast<uint16_t>(p[offset] | (p[offset + 1] << 8));
}

} // namespace

TEST(half, every_half_survives_a_float_round_trip) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    bool nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    if (!nan) {
      ASSERT_EQ(float_to_half_rn(half_to_float(static_cast<uint16_t>(h))), h) << h;
    }
  }
}

TEST(half, rounds_to_nearest_even_and_overflows_to_infinity) {
  EXPECT_EQ(float_to_half_rn(1.0f + 1.0f / 2048), 0x3C00);     // tie -> even (1.0)
  EXPECT_EQ(float_to_half_rn(1.0f + 3.0f / 2048), 0x3C02);     // tie -> even (1 + 2^-9)
  EXPECT_EQ(float_to_half_rn(65519.0f), 0x7BFF);               // below the midpoint: 65504
  EXPECT_EQ(float_to_half_rn(65520.0f), 0x7C00);               // the midpoint rounds to infinity
  EXPECT_EQ(float_to_half_rn(std::ldexp(1.0f, -25)), 0x0000);  // half the smallest subnormal: even
  EXPECT_EQ(float_to_half_rn(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 subnormal steps: even
  EXPECT_EQ(float_to_half_rn(-std::ldexp(1.0f, -14)), 0x8400); // smallest normal
}

TEST(fp8_e4m3, every_code_survives_a_round_trip) {
  for (uint32_t c = 0; c < 256; ++c) {
    if ((c & 0x7Fu) == 0x7Fu)
      continue; // NaN
    ASSERT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
}

TEST(fp8_e4m3, rounds_to_nearest_even_and_saturates) {
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(float_to_e4m3(449.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3(1e9f), 0x7E);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xFE);
  EXPECT_EQ(float_to_e4m3(NAN), 0x7F);
  EXPECT_EQ(float_to_e4m3(17.0f), 0x58);                 // tie between 16 and 18 -> 16
  EXPECT_EQ(float_to_e4m3(19.0f), 0x5A);                 // tie between 18 and 20 -> 20
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00); // tie between 0 and 2^-9 -> 0
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02); // tie -> 2 * 2^-9
  EXPECT_EQ(float_to_e4m3(std::ldexp(7.5f, -9)), 0x08);  // subnormal tie rounds up into 2^-6
  EXPECT_EQ(float_to_e4m3(std::ldexp(15.5f, -9)), 0x10); // normal tie 1.9375 * 2^-6 -> 2^-5
  EXPECT_EQ(float_to_e4m3(-1.0f), 0xB8);
}

TEST(quant_format, byte_counts_match_kvtier_calc) {
  tile_shape shape{80 * 8 * 2, 16, 128}; // one 16-token block of Llama-3-70B
  EXPECT_EQ(packed_bytes(scheme::fp8_token, shape), kvtier::stored_bytes(kvtier::kv_dtype::fp8, shape.elements(), 128));
  EXPECT_EQ(packed_bytes(scheme::int8_token, shape),
            kvtier::stored_bytes(kvtier::kv_dtype::int8, shape.elements(), 128));
  EXPECT_EQ(packed_bytes(scheme::int4_token, shape),
            kvtier::stored_bytes(kvtier::kv_dtype::int4, shape.elements(), 128));
  EXPECT_EQ(packed_bytes(scheme::int4_row, shape),
            kvtier::stored_bytes(kvtier::kv_dtype::int4_row, shape.elements(), 128));
  EXPECT_EQ(packed_bytes(scheme::int4_row, shape), shape.rows() * (64 + 4)); // 3.76x below fp16's 256 a row
  tile_shape keys{4, 64, 128};
  EXPECT_EQ(packed_bytes(scheme::int4_channel, keys), 4u * 64 * 64 + 4u * 2 * 128 * 4);
  EXPECT_EQ(packed_bytes(scheme::fp8_tensor, keys), 4u * 64 * 128 + 4u * 4);
  EXPECT_FALSE(fits(scheme::int4_channel, tile_shape{1, 16, 128}));
  EXPECT_FALSE(fits(scheme::int4_token, tile_shape{1, 16, 48}));
}

TEST(quant_cpu, fp8_token_exact_row) {
  auto in = halves({448.0f, -224.0f, 1.0f, 0.0f});
  std::vector<uint8_t> p;
  auto out = round_trip(scheme::fp8_token, {1, 1, 4}, in, &p);
  EXPECT_EQ(p, (std::vector<uint8_t>{0x7E, 0xF6, 0x38, 0x00, 0x00, 0x3C})); // codes, then fp16 scale 1.0
  EXPECT_EQ(out, in);
}

TEST(quant_cpu, fp8_tensor_keeps_an_fp32_scale) {
  auto in = halves({896.0f, -1.0f, 2.0f, 0.5f});
  std::vector<uint8_t> p;
  auto out = round_trip(scheme::fp8_tensor, {1, 2, 2}, in, &p);
  // scale = 896 / 448 = 2: codes 448, -0.5, 1, 0.25; scale 2.0f little-endian.
  EXPECT_EQ(p, (std::vector<uint8_t>{0x7E, 0xB0, 0x38, 0x28, 0x00, 0x00, 0x00, 0x40}));
  EXPECT_EQ(out, in);
}

TEST(quant_cpu, int8_token_rounds_half_to_even) {
  auto in = halves({127.0f, -63.5f, 0.5f, 1.5f});
  std::vector<uint8_t> p;
  auto out = round_trip(scheme::int8_token, {1, 1, 4}, in, &p);
  EXPECT_EQ(p, (std::vector<uint8_t>{0x7F, 0xC0, 0x00, 0x02, 0x00, 0x3C}));
  EXPECT_EQ(floats(out), (std::vector<float>{127.0f, -64.0f, 0.0f, 2.0f}));
}

TEST(quant_cpu, int4_token_group_of_32_by_hand) {
  // min -1, max 14: scale 1, zero -1. 0.5 -> code 1.5 -> 2 -> 1.0; 2.5 -> 3.5 -> 4 -> 3.0.
  auto in = sparse_halves(32, {{0, -1.0f}, {1, 14.0f}, {2, 0.5f}, {3, 2.5f}});
  std::vector<uint8_t> p;
  auto out = floats(round_trip(scheme::int4_token, {1, 1, 32}, in, &p));
  EXPECT_EQ(p[0], 0xF0);             // codes 0 (low nibble) and 15 (high)
  EXPECT_EQ(p[1], 0x42);             // codes 2 and 4
  EXPECT_EQ(p[2], 0x11);             // zeros -> code 1
  EXPECT_EQ(half_at(p, 16), 0x3C00); // scale 1.0
  EXPECT_EQ(half_at(p, 18), 0xBC00); // zero -1.0
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], 14.0f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[3], 3.0f);
  EXPECT_EQ(out[4], 0.0f);
}

TEST(quant_cpu, int4_row_one_group_per_row_by_hand) {
  // Row 0 as the int4_token case above but 64 wide: one scale and zero for all 64 values.
  // Row 1: min 0, max 30 -> scale 2, zero 0; 3.0 -> code 1.5 -> 2 -> 4.0.
  auto in = sparse_halves(128, {{0, -1.0f}, {40, 14.0f}, {2, 0.5f}, {63, 2.5f}, {64 + 10, 30.0f}, {64 + 11, 3.0f}});
  std::vector<uint8_t> p;
  auto out = floats(round_trip(scheme::int4_row, {1, 2, 64}, in, &p));
  ASSERT_EQ(p.size(), 2u * 32 + 2 * 4);
  EXPECT_EQ(p[0], 0x10);             // codes 0 (-1) and 1 (0.0)
  EXPECT_EQ(p[1], 0x12);             // codes 2 (0.5 -> 1.5 -> 2) and 1
  EXPECT_EQ(p[20], 0x1F);            // value 40 (low nibble): code 15; value 41: code 1
  EXPECT_EQ(p[31], 0x41);            // value 63: 2.5 -> 3.5 -> 4
  EXPECT_EQ(p[32 + 5], 0x2F);        // row 1, values 10 and 11: codes 15 and 2
  EXPECT_EQ(half_at(p, 64), 0x3C00); // row 0: scale 1.0
  EXPECT_EQ(half_at(p, 66), 0xBC00); //        zero -1.0
  EXPECT_EQ(half_at(p, 68), 0x4000); // row 1: scale 2.0
  EXPECT_EQ(half_at(p, 70), 0x0000); //        zero 0
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[40], 14.0f);
  EXPECT_EQ(out[2], 1.0f);
  EXPECT_EQ(out[63], 3.0f);
  EXPECT_EQ(out[64 + 10], 30.0f);
  EXPECT_EQ(out[64 + 11], 4.0f);
  EXPECT_EQ(out[64], 0.0f);
}

TEST(quant_cpu, int4_channel_groups_run_along_tokens) {
  // Channel 0 ramps 0..15 then stays 15 (scale 1, exact); channel 1 is constant 5 (scale 0).
  std::vector<uint16_t> in;
  for (uint32_t t = 0; t < 32; ++t) {
    in.push_back(float_to_half_rn(static_cast<float>(std::min(t, 15u))));
    in.push_back(float_to_half_rn(5.0f));
  }
  std::vector<uint8_t> p;
  auto out = round_trip(scheme::int4_channel, {1, 32, 2}, in, &p);
  EXPECT_EQ(out, in);
  EXPECT_EQ(p[5], 0x05);             // token 5: channel 0 code 5, channel 1 code 0
  EXPECT_EQ(half_at(p, 32), 0x3C00); // channel 0: scale 1
  EXPECT_EQ(half_at(p, 34), 0x0000); //            zero 0
  EXPECT_EQ(half_at(p, 36), 0x0000); // channel 1: scale 0
  EXPECT_EQ(half_at(p, 38), 0x4500); //            zero 5
}

// |x - x^| bounds, per format (see docs/compression.md):
//   fp8:  2^-4 |x| (3 mantissa bits) + 2^-10 s (subnormals) + 2^-10 amax (half roundings, saturation)
//   int8: s / 2 + 2^-10 amax
//   int4: s / 2 + 2^-9 (|min| + |max|)
TEST(quant_cpu, per_token_error_bounds) {
  const uint32_t rows = 256, ch = 128;
  auto in = random_keys(rows, ch, 7);
  for (auto s : {scheme::fp8_token, scheme::int8_token}) {
    std::vector<uint8_t> p;
    auto out = round_trip(s, {1, rows, ch}, in, &p);
    for (uint32_t r = 0; r < rows; ++r) {
      float scale = half_to_float(half_at(p, uint64_t{rows} * ch + 2 * r));
      float amax = scale * (s == scheme::fp8_token ? 448.0f : 127.0f);
      for (uint32_t c = 0; c < ch; ++c) {
        float x = half_to_float(in[r * ch + c]);
        float err = std::fabs(x - half_to_float(out[r * ch + c]));
        float bound = s == scheme::fp8_token ? 0.0625f * std::fabs(x) + std::ldexp(scale + amax, -10)
                                             : 0.5f * scale + std::ldexp(amax, -10);
        ASSERT_LE(err, bound) << name_of(s) << " row " << r << " channel " << c;
      }
    }
  }
}

TEST(quant_cpu, int4_error_bounds_per_group) {
  const uint32_t rows = 64, ch = 128;
  auto in = random_keys(rows, ch, 11);
  for (auto s : {scheme::int4_token, scheme::int4_channel, scheme::int4_row}) {
    std::vector<uint8_t> p;
    auto out = round_trip(s, {1, rows, ch}, in, &p);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < ch; ++c) {
        uint64_t group = s == scheme::int4_token ? r * (ch / 32) + c / 32
            : s == scheme::int4_row              ? r
                                                 : (r / 32) * ch + c;
        uint64_t at = uint64_t{rows} * ch / 2 + 4 * group;
        float scale = half_to_float(half_at(p, at));
        float zero = half_to_float(half_at(p, at + 2));
        float top = zero + 15.0f * scale;
        float x = half_to_float(in[r * ch + c]);
        float err = std::fabs(x - half_to_float(out[r * ch + c]));
        ASSERT_LE(err, 0.5f * scale + std::ldexp(std::fabs(zero) + std::fabs(top), -9)) << name_of(s);
      }
  }
}

TEST(quant_cpu, keeping_outlier_channels_in_fp16_lowers_int4_error) {
  const uint32_t rows = 64, ch = 128;
  auto in = random_keys(rows, ch, 3);
  EXPECT_EQ(select_outlier_channels(in.data(), rows, ch, 2), (std::vector<uint32_t>{3, 17}));
  auto mse = [&](const std::vector<uint16_t>& out) {
    double sum = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      double d = double(half_to_float(in[i])) - half_to_float(out[i]);
      sum += d * d;
    }
    return sum / double(in.size());
  };
  auto plain = round_trip(scheme::int4_token, rows, ch, in.data(), 0, 0);
  auto kept = round_trip(scheme::int4_token, rows, ch, in.data(), 0, 2);
  EXPECT_LT(mse(kept.values), 0.5 * mse(plain.values));
  EXPECT_EQ(kept.stored_bytes, plain.stored_bytes + 2 * 2 + 64u * 2 * 2);
  for (uint32_t r = 0; r < rows; ++r)
    EXPECT_EQ(kept.values[r * ch + 3], in[r * ch + 3]); // outliers are exact
}

TEST(precision_plan, first_and_last_layers_stay_fp16) {
  precision_plan plan;
  plan.fp16_first = 2;
  plan.fp16_last = 1;
  EXPECT_EQ(plan.key_scheme_for(0, 32), std::nullopt);
  EXPECT_EQ(plan.key_scheme_for(1, 32), std::nullopt);
  EXPECT_EQ(plan.key_scheme_for(2, 32), scheme::int4_channel);
  EXPECT_EQ(plan.value_scheme_for(30, 32), scheme::int4_token);
  EXPECT_EQ(plan.value_scheme_for(31, 32), std::nullopt);
}

TEST(precision_plan, kivi_round_trip_keeps_recent_tokens_exact) {
  const uint32_t tokens = 100, ch = 64;
  auto in = random_keys(tokens, ch, 5);
  auto r = round_trip(scheme::int4_channel, tokens, ch, in.data(), 32, 0);
  // 100 - 32 = 68 tokens before the window; 64 (two groups) are quantized, 36 stay fp16.
  EXPECT_EQ(r.stored_bytes, packed_bytes(scheme::int4_channel, {1, 64, ch}) + 36u * ch * 2);
  for (uint32_t i = 64 * ch; i < tokens * ch; ++i)
    ASSERT_EQ(r.values[i], in[i]);
}

TEST(quant_cpu, the_largest_fp16_values_stay_finite) {
  // 448 * half(65504 / 448) = 448 * 146.25 = 65520 would round to infinity; it is clamped to 65504.
  auto in = halves({65504.0f, -65504.0f, 1.0f, 0.0f});
  for (auto s : {scheme::fp8_token, scheme::int8_token, scheme::fp8_tensor}) {
    auto out = round_trip(s, {1, 1, 4}, in);
    EXPECT_EQ(out[0], 0x7BFF) << name_of(s);
    EXPECT_EQ(out[1], 0xFBFF) << name_of(s);
  }
  std::vector<uint16_t> group(32, float_to_half_rn(-65504.0f));
  group[5] = float_to_half_rn(65504.0f);
  auto out = round_trip(scheme::int4_token, {1, 1, 32}, group);
  EXPECT_EQ(out[5], 0x7BFF);
  EXPECT_EQ(out[0], 0xFBFF);
}

TEST(block_codec, layers_formats_offsets_and_bytes) {
  precision_plan plan;
  plan.key_scheme = scheme::int4_channel;
  plan.value_scheme = scheme::int4_token;
  plan.fp16_first = 1;
  block_shape shape{3, 2, 32, 64};
  auto codec = plan_block(shape, plan);
  ASSERT_EQ(codec.slices.size(), 6u);
  EXPECT_FALSE(codec.fell_back);
  EXPECT_EQ(codec.slices[0].format, std::nullopt); // layer 0 stays fp16
  EXPECT_EQ(codec.slices[2].format, scheme::int4_channel);
  EXPECT_EQ(codec.slices[3].format, scheme::int4_token);
  // A slice is 2 x 32 x 64 = 4096 elements: 8192 fp16 bytes; int4 = 2048 + 128 groups * 4.
  EXPECT_EQ(codec.fp16_bytes, 6u * 8192);
  EXPECT_EQ(codec.slices[2].dst_offset, 2u * 8192);
  EXPECT_EQ(codec.slices[2].dst_bytes, 2048u + 512);
  EXPECT_EQ(codec.packed_bytes, 2u * 8192 + 4u * 2560);
  for (const auto& s : codec.slices)
    EXPECT_EQ(s.dst_offset % 16, 0u);
}

TEST(block_codec, sixteen_token_blocks_fall_back_for_keys) {
  precision_plan plan; // int4_channel keys need 32 tokens
  auto codec = plan_block({1, 8, 16, 128}, plan);
  EXPECT_TRUE(codec.fell_back);
  EXPECT_EQ(codec.slices[0].format, scheme::int4_token);
  // Llama-3-8B per layer and block: int4 bytes equal kvtier calc's (stored_bytes of int4).
  EXPECT_EQ(codec.packed_bytes, 2 * kvtier::stored_bytes(kvtier::kv_dtype::int4, 8u * 16 * 128, 128));
}

TEST(block_codec, round_trip_matches_the_per_slice_formats) {
  precision_plan plan;
  plan.key_scheme = scheme::fp8_token;
  plan.value_scheme = scheme::int8_token;
  plan.fp16_last = 1;
  block_shape shape{2, 2, 16, 64};
  auto codec = plan_block(shape, plan);
  auto in = random_keys(2 * 2 * 2 * 16, 64, 9); // layers x K/V x heads x tokens rows
  std::vector<uint8_t> packed(codec.packed_bytes);
  std::vector<uint16_t> out(in.size());
  encode_block(codec, in.data(), packed.data());
  decode_block(codec, packed.data(), out.data());
  // Layer 1 is fp16: exact. Layer 0 K is what fp8_token alone gives.
  for (size_t i = in.size() / 2; i < in.size(); ++i)
    ASSERT_EQ(out[i], in[i]);
  std::vector<uint16_t> k0(in.begin(), in.begin() + 2 * 16 * 64);
  auto expect = round_trip(scheme::fp8_token, {2, 16, 64}, k0);
  EXPECT_TRUE(std::equal(expect.begin(), expect.end(), out.begin()));
}

namespace {

std::vector<uint16_t> bf16s(std::initializer_list<float> values) {
  std::vector<uint16_t> out;
  for (float v : values) {
    uint32_t u = float_bits(v);
    out.push_back(static_cast<uint16_t>(u >> 16)); // these values are exact in bf16
  }
  return out;
}

} // namespace

TEST(quant_cpu, bf16_rows_use_the_same_codes_and_keep_bf16_range) {
  // The fp16 case above, read from bf16: same codes, same scale.
  auto in = bf16s({448.0f, -224.0f, 1.0f, 0.0f});
  std::vector<uint8_t> p(packed_bytes(scheme::fp8_token, {1, 1, 4}));
  quantize(scheme::fp8_token, {1, 1, 4}, in.data(), p.data(), element_type::bf16);
  EXPECT_EQ(p, (std::vector<uint8_t>{0x7E, 0xF6, 0x38, 0x00, 0x00, 0x3C}));
  std::vector<uint16_t> out(4);
  dequantize(scheme::fp8_token, {1, 1, 4}, p.data(), out.data(), element_type::bf16);
  EXPECT_EQ(out, in);
  // 65536 is past fp16's range but not bf16's: a bf16 tile dequantizes it unclamped.
  auto big = bf16s({65536.0f, 0.0f, 0.0f, 0.0f});
  quantize(scheme::int8_token, {1, 1, 4}, big.data(), p.data(), element_type::bf16);
  dequantize(scheme::int8_token, {1, 1, 4}, p.data(), out.data(), element_type::bf16);
  EXPECT_EQ(out[0], 0x4780); // bf16 65536 (scale half(65536 / 127) = 516, 127 * 516 = 65532 -> bf16 65536)
}

TEST(offload_codec, slices_of_llama_geometry_and_refusals) {
  std::string why;
  auto fp8 = make_offload_codec(scheme::fp8_token, element_type::bf16, 8, 16, 128, &why);
  ASSERT_TRUE(fp8) << why;
  EXPECT_EQ(fp8->raw_bytes(), 65536u);    // 2 x 8 heads x 16 tokens x 128 x 2 bytes
  EXPECT_EQ(fp8->packed_bytes(), 33280u); // 256 rows x (128 codes + 2-byte scale)
  auto int4 = make_offload_codec(scheme::int4_token, element_type::bf16, 8, 16, 128, &why);
  ASSERT_TRUE(int4) << why;
  EXPECT_EQ(int4->packed_bytes(), 20480u); // 256 rows x (64 code bytes + 4 groups x 4 bytes)
  auto int4_row = make_offload_codec(scheme::int4_row, element_type::bf16, 8, 16, 128, &why);
  ASSERT_TRUE(int4_row) << why;
  EXPECT_EQ(int4_row->packed_bytes(), 17408u); // 256 rows x (64 code bytes + 4): 65536 / 17408 = 3.76x
  EXPECT_FALSE(make_offload_codec(scheme::fp8_tensor, element_type::bf16, 8, 16, 128, &why));
  EXPECT_EQ(why, "fp8_tensor is not a per-row format (fp8_token, int8_token, int4_token or int4_row)");
  EXPECT_FALSE(make_offload_codec(scheme::fp8_token, element_type::bf16, 8, 16, 96, &why));
  EXPECT_EQ(why, "head_dim 96 is not a power of two from 8 to 256");
  EXPECT_FALSE(make_offload_codec(scheme::int4_token, element_type::bf16, 8, 16, 16, &why));
  // An odd row count pads the packed slice to 16 bytes, and the padding is zero.
  auto odd = make_offload_codec(scheme::fp8_token, element_type::bf16, 1, 1, 16, &why);
  ASSERT_TRUE(odd) << why;
  EXPECT_EQ(odd->packed_bytes(), 48u); // 2 rows x 16 codes + 2 x 2 scale bytes = 36 -> 48
  std::vector<std::byte> raw(odd->raw_bytes(), std::byte{0x3F}), packed(48, std::byte{0xAA});
  encode_slice(*odd, raw.data(), packed.data());
  for (size_t b = 36; b < 48; ++b)
    EXPECT_EQ(packed[b], std::byte{0}) << b;
}
