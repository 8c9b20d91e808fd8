// Quantize-on-offload through a tier_mover: blocks demoted with a codec land
// in DRAM exactly as the CPU codec (kernels/quant/offload_codec.hpp) encodes
// them, come back exactly as it decodes them, and the link carries the packed
// bytes. Compiled against the CPU twin (test_copy) and the GPU mover
// (test_copy_cuda, skipped without a GPU), so the CUDA kernels are checked
// byte for byte against the CPU twin.

#include "kernels/copy/cpu_mover.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "kernels/quant/offload_codec.hpp"
#include "tests/kernels/copy_test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kvtier;
using namespace kvtier::copy;
using namespace kvtier::copy::test;

namespace {

// 2 kv heads x 4 tokens x head_dim 32: 16 rows of 32 values, 1,024 raw bytes a layer
// (or 1 kv head x head_dim 64: 8 rows of 64 values, the same bytes).
constexpr uint32_t layers = 3;
constexpr uint64_t raw_layer = 1024;

struct codec_case {
  quant::scheme format;
  quant::element_type element;
  uint64_t packed_layer; // expected packed bytes of one slice
  uint32_t kv_heads = 2;
  uint32_t head_dim = 32;
};

class codec_mover_test : public ::testing::TestWithParam<codec_case> {
protected:
  void SetUp() override {
    std::string why;
    auto codec = quant::make_offload_codec(GetParam().format, GetParam().element, GetParam().kv_heads, 4,
                                           GetParam().head_dim, &why);
    ASSERT_TRUE(codec) << why;
    codec_ = *codec;
    ASSERT_EQ(codec_.raw_bytes(), raw_layer);
    ASSERT_EQ(codec_.packed_bytes(), GetParam().packed_layer);
    mover_options o;
    o.shape = {24, 40, layers, raw_layer};
    o.shape.codec = codec_;
    o.host_threads = 3;
    o.chunk_bytes = 3 * layers * codec_.packed_bytes(); // 8-block requests cross chunks and both halves
    o.calibrate = false;
    o.dma_streams = 2;
#ifdef KVTIER_COPY_TEST_CUDA
    mover_ = make_cuda_mover(o, &why);
    if (!mover_)
      GTEST_SKIP() << why;
#else
    mover_ = make_cpu_mover(o);
#endif
  }

  // KV-like values: mostly within +-4, one outlier channel per row, stored in the pool's element type.
  std::vector<std::byte> block_values(uint64_t seed) const {
    std::mt19937_64 rng{seed};
    std::normal_distribution<float> normal{0.0f, 1.5f};
    std::vector<uint16_t> v(layers * raw_layer / 2);
    for (size_t i = 0; i < v.size(); ++i) {
      float x = normal(rng) * (i % 32 == 7 ? 20.0f : 1.0f);
      v[i] = GetParam().element == quant::element_type::bf16 ? bf16_bits(x) : half_bits(x);
    }
    std::vector<std::byte> out(layers * raw_layer);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  static uint16_t bf16_bits(float x) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
  static uint16_t half_bits(float x) { // values here are normal halves: truncation is fine for a test input
    uint32_t u;
    std::memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = static_cast<int32_t>((u >> 23) & 0xFF) - 127 + 15;
    if (exp <= 0)
      return static_cast<uint16_t>(sign);
    return static_cast<uint16_t>(sign | (static_cast<uint32_t>(exp) << 10) | ((u >> 13) & 0x3FFu));
  }

  std::vector<std::byte> encoded(const std::vector<std::byte>& raw) const {
    std::vector<std::byte> out(layers * codec_.packed_bytes());
    for (uint32_t l = 0; l < layers; ++l)
      quant::encode_slice(codec_, raw.data() + l * raw_layer, out.data() + l * codec_.packed_bytes());
    return out;
  }
  std::vector<std::byte> decoded(const std::vector<std::byte>& packed) const {
    std::vector<std::byte> out(layers * raw_layer);
    for (uint32_t l = 0; l < layers; ++l)
      quant::decode_slice(codec_, packed.data() + l * codec_.packed_bytes(), out.data() + l * raw_layer);
    return out;
  }
  std::vector<std::byte> read(tier t, uint32_t slot) {
    std::vector<std::byte> out(mover_->layout(t).block_bytes());
    mover_->read_slot(t, slot, out);
    return out;
  }

  quant::offload_codec codec_;
  std::unique_ptr<tier_mover> mover_;
};

TEST_P(codec_mover_test, demoted_blocks_are_the_codec_bytes_and_come_back_decoded) {
  ASSERT_EQ(mover_->layout(tier::dram).block_bytes(), layers * codec_.packed_bytes());
  // Ten blocks: DRAM slots 4..9 ascend (one run), the rest scatter.
  std::vector<uint32_t> hbm{3, 17, 0, 22, 9, 11, 5, 14, 8, 20};
  std::vector<uint32_t> dram{4, 5, 6, 7, 8, 9, 31, 2, 39, 17};
  std::vector<std::vector<std::byte>> raw;
  std::vector<slot_pair> down;
  for (size_t i = 0; i < hbm.size(); ++i) {
    raw.push_back(block_values(100 + i));
    mover_->write_slot(tier::hbm, hbm[i], raw.back());
    down.push_back({hbm[i], dram[i]});
  }
  move_request r{tier::hbm, tier::dram, down};
  r.tag = 5;
  auto res = move_now(*mover_, r);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.bytes, hbm.size() * layers * codec_.packed_bytes());
  auto d2h = mover_->stats(tier::hbm, tier::dram);
  EXPECT_EQ(d2h.bytes, hbm.size() * layers * codec_.packed_bytes());
  EXPECT_EQ(d2h.logical_bytes, hbm.size() * layers * raw_layer);
  for (size_t i = 0; i < hbm.size(); ++i)
    EXPECT_EQ(block_checksum(read(tier::dram, dram[i])), block_checksum(encoded(raw[i]))) << "dram slot " << dram[i];

  // Poison HBM, bring the blocks back into other slots.
  for (uint32_t s = 0; s < 24; ++s)
    mover_->write_slot(tier::hbm, s, pattern(9, s, layers * raw_layer));
  std::vector<slot_pair> up;
  for (size_t i = 0; i < hbm.size(); ++i)
    up.push_back({dram[i], static_cast<uint32_t>(23 - i)});
  ASSERT_TRUE(move_now(*mover_, move_request{tier::dram, tier::hbm, up}).ok);
  for (size_t i = 0; i < hbm.size(); ++i) {
    auto want = decoded(encoded(raw[i]));
    auto got = read(tier::hbm, static_cast<uint32_t>(23 - i));
    EXPECT_EQ(block_checksum(got), block_checksum(want)) << "hbm slot " << 23 - i;
    EXPECT_NE(block_checksum(got), block_checksum(raw[i])) << "a lossy codec changed nothing";
  }
  EXPECT_EQ(block_checksum(read(tier::hbm, 0)), block_checksum(pattern(9, 0, layers * raw_layer)));
}

TEST_P(codec_mover_test, a_layer_range_decodes_only_those_layers) {
  auto raw = block_values(7);
  mover_->write_slot(tier::hbm, 2, raw);
  ASSERT_TRUE(move_now(*mover_, move_request{tier::hbm, tier::dram, {{2, 11}}}).ok);
  auto before = pattern(3, 6, layers * raw_layer);
  mover_->write_slot(tier::hbm, 6, before);
  move_request r{tier::dram, tier::hbm, {{11, 6}}};
  r.first_layer = 1;
  r.layer_count = 1;
  auto res = move_now(*mover_, r);
  ASSERT_TRUE(res.ok) << res.error;
  EXPECT_EQ(res.bytes, codec_.packed_bytes());
  auto got = read(tier::hbm, 6);
  auto want = decoded(encoded(raw));
  EXPECT_EQ(0, std::memcmp(got.data(), before.data(), raw_layer));
  EXPECT_EQ(0, std::memcmp(got.data() + raw_layer, want.data() + raw_layer, raw_layer));
  EXPECT_EQ(0, std::memcmp(got.data() + 2 * raw_layer, before.data() + 2 * raw_layer, raw_layer));
}

std::string case_name(const ::testing::TestParamInfo<codec_case>& p) {
  return std::string{quant::name_of(p.param.format)} +
      (p.param.element == quant::element_type::bf16 ? "_bf16" : "_fp16") + "_d" + std::to_string(p.param.head_dim);
}

INSTANTIATE_TEST_SUITE_P(formats, codec_mover_test,
                         ::testing::Values(codec_case{quant::scheme::fp8_token, quant::element_type::bf16, 544},
                                           codec_case{quant::scheme::int8_token, quant::element_type::bf16, 544},
                                           codec_case{quant::scheme::int4_token, quant::element_type::bf16, 320},
                                           // One scale group per 64-value row: 8 rows x (32 + 4) bytes.
                                           codec_case{quant::scheme::int4_row, quant::element_type::bf16, 288, 1, 64},
                                           codec_case{quant::scheme::int4_row, quant::element_type::fp16, 288, 1, 64},
                                           codec_case{quant::scheme::fp8_token, quant::element_type::fp16, 544}),
                         case_name);

} // namespace
