// compression/model_quality: the measured harness on a tiny seeded model over
// a synthetic byte text. Exact checks: what a full budget gives, the kept
// block counts, the oracle's kept mass against every policy's, independence
// from the thread count, the full cache's loss recomputed outside the
// harness, and the errors that name the option.

#include "compression/model_quality.hpp"
#include "kernels/model/forward_cpu.hpp"
#include "kernels/model/host_kv_pool.hpp"
#include "runtime/error.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace kvtier::compression {
namespace {

model::llama_config tiny() {
  model::llama_config c;
  c.vocab = 256;
  c.hidden = 32;
  c.intermediate = 64;
  c.layers = 2;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32; // int4_token needs 32 channels
  c.rope_theta = 10000;
  return c;
}

// Text with structure (repeated words at varying distances), not noise.
std::vector<uint8_t> text(size_t n) {
  const char* words[] = {"block ", "cache ", "tier ", "page ", "kernel ", "the ", "of ", "hash "};
  std::vector<uint8_t> out;
  uint64_t x = 7;
  while (out.size() < n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    for (const char* c = words[(x >> 33) % 8]; *c; ++c)
      out.push_back(static_cast<uint8_t>(*c));
  }
  out.resize(n);
  return out;
}

quality_options small() {
  quality_options o;
  o.context_tokens = 256; // 16 blocks
  o.continuation_tokens = 24;
  o.windows = 3;
  o.passkeys = 2;
  o.budgets = {0.1, 0.5, 1.0};
  o.policies = {"random", "streaming_llm", "h2o", "h2o_raw", "snapkv", "oracle"};
  o.quantizers = {"fp8_kv", "int8_token", "int4_token"};
  o.threads = 1;
  return o;
}

struct fixture {
  model::llama_weights w = model::seeded_weights(tiny(), 3);
  std::vector<uint8_t> bytes = text(4000);
};

TEST(model_quality, a_full_budget_is_the_full_cache_and_kept_blocks_are_exact) {
  fixture f;
  auto r = measure_quality(f.w, f.bytes, small());
  ASSERT_TRUE(r) << describe(r.error());
  const auto& full = r->rows.front();
  EXPECT_EQ(full.name, "full");
  EXPECT_EQ(full.kept_blocks, 5u * 16); // 3 windows + 2 prompts, 16 blocks each
  for (const char* p : {"random", "streaming_llm", "h2o", "h2o_raw", "snapkv", "oracle"}) {
    SCOPED_TRACE(p);
    const auto* at_full = r->find(p, 1.0);
    ASSERT_NE(at_full, nullptr);
    EXPECT_EQ(at_full->nats_per_byte, full.nats_per_byte);
    EXPECT_EQ(at_full->passkey_nats, full.passkey_nats);
    EXPECT_EQ(at_full->kept_blocks, full.kept_blocks);
    // 50%: 8 blocks of 16. 10%: 26 tokens = 2 blocks, but the sink block and the
    // 32 recent tokens (2 blocks) are protected: 3; the oracle protects only the last.
    EXPECT_EQ(r->find(p, 0.5)->kept_blocks, 5u * 8);
    EXPECT_EQ(r->find(p, 0.1)->kept_blocks, std::string_view(p) == "oracle" ? 5u * 2 : 5u * 3);
  }
  // Rows: full, 6 policies x 3 budgets, 3 quantizers.
  EXPECT_EQ(r->rows.size(), 1u + 18 + 3);
  EXPECT_EQ(r->rows.back().name, "int4_token");
}

TEST(model_quality, the_oracle_keeps_the_most_future_mass_at_equal_size) {
  fixture f;
  auto r = measure_quality(f.w, f.bytes, small());
  ASSERT_TRUE(r);
  const double oracle = r->find("oracle", 0.5)->mass_kept;
  for (const char* p : {"random", "streaming_llm", "h2o", "h2o_raw", "snapkv"}) {
    SCOPED_TRACE(p);
    EXPECT_GE(oracle, r->find(p, 0.5)->mass_kept);
    EXPECT_LT(r->find(p, 0.5)->mass_kept, 1.0);
  }
  EXPECT_DOUBLE_EQ(r->gap_closed("oracle", 0.5), 1.0);
  EXPECT_DOUBLE_EQ(r->gap_closed("random", 0.5), 0.0);
  EXPECT_EQ(r->find("random", 0.5)->gap_closed_stderr, 0.0); // random minus itself, every window
  EXPECT_GT(r->find("snapkv", 0.5)->gap_closed_stderr, 0.0);
  EXPECT_TRUE(std::isnan(r->find("full", 1.0)->gap_closed_stderr)); // no random row at budget 1
  EXPECT_EQ(r->find("full", 1.0)->mass_kept, 1.0);
}

TEST(model_quality, the_thread_count_changes_no_result) {
  fixture f;
  auto o = small();
  auto one = measure_quality(f.w, f.bytes, o);
  o.threads = 3;
  auto three = measure_quality(f.w, f.bytes, o);
  ASSERT_TRUE(one && three);
  ASSERT_EQ(one->rows.size(), three->rows.size());
  for (size_t i = 0; i < one->rows.size(); ++i) {
    SCOPED_TRACE(one->rows[i].name);
    EXPECT_EQ(one->rows[i].nats_per_byte, three->rows[i].nats_per_byte);
    EXPECT_EQ(one->rows[i].passkey_accuracy, three->rows[i].passkey_accuracy);
    EXPECT_EQ(one->rows[i].mass_kept, three->rows[i].mass_kept);
  }
  EXPECT_EQ(one->tokens_fed, three->tokens_fed);
}

TEST(model_quality, the_full_cache_loss_is_the_models_own) {
  // One window, recomputed outside the harness: the context prefilled in one
  // chunk, then each continuation byte; chunking never changes a bit.
  fixture f;
  auto o = small();
  o.windows = 1;
  o.passkeys = 0;
  o.policies = {};
  o.quantizers = {};
  auto r = measure_quality(f.w, f.bytes, o);
  ASSERT_TRUE(r);
  const uint32_t C = o.context_tokens, M = o.continuation_tokens, B = 16;
  const model::llama_config c = tiny();
  model::host_kv_pool pool(c, 18, B);
  model::cpu_forward forward(f.w, pool.view);
  std::vector<uint32_t> table(18);
  std::iota(table.begin(), table.end(), 0u);
  std::vector<uint32_t> tokens(f.bytes.begin(), f.bytes.begin() + C + M + 1); // window 0 starts at 0
  forward.run({std::span(tokens).first(C), 0, 0, table});
  double nats = 0;
  for (uint32_t i = 0; i < M; ++i) {
    auto out = forward.run({std::span(tokens).subspan(C + i, 1), C + i, C + i, table});
    const float top = *std::max_element(out.logits.begin(), out.logits.end());
    double sum = 0;
    for (float l : out.logits)
      sum += std::exp(static_cast<double>(l) - top);
    nats += std::log(sum) - (static_cast<double>(out.logits[tokens[C + i + 1]]) - top);
  }
  EXPECT_EQ(r->rows.front().nats_per_byte, nats / M);
  EXPECT_EQ(r->tokens_fed, uint64_t{C} + M);
}

TEST(model_quality, quantizers_change_the_loss_a_little) {
  fixture f;
  auto r = measure_quality(f.w, f.bytes, small());
  ASSERT_TRUE(r);
  const double full = r->rows.front().nats_per_byte;
  for (const char* q : {"fp8_kv", "int8_token", "int4_token"}) {
    SCOPED_TRACE(q);
    const double loss = r->find(q, 1.0)->nats_per_byte;
    EXPECT_NE(loss, full);
    EXPECT_LT(std::abs(loss - full), 0.05 * full);
  }
}

TEST(model_quality, bad_options_are_errors_that_name_them) {
  fixture f;
  auto o = small();
  o.policies = {"h2o", "lru"};
  auto r = measure_quality(f.w, f.bytes, o);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("unknown policy 'lru'"), std::string::npos) << describe(r.error());
  o = small();
  o.context_tokens = 250;
  r = measure_quality(f.w, f.bytes, o);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("context_tokens (250)"), std::string::npos);
  o = small();
  o.quantizers = {"int3"};
  r = measure_quality(f.w, f.bytes, o);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("unknown quantizer 'int3'"), std::string::npos);
  r = measure_quality(f.w, std::span(f.bytes).first(200), small());
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find("shorter than a window"), std::string::npos);
}

TEST(model_quality, the_passkey_texts_match_the_training_script) {
  EXPECT_EQ(passkey_needle("01234"), "\nThe pass key is 01234. Remember it. 01234 is the pass key.\n");
  EXPECT_EQ(passkey_question(), "\nWhat is the pass key? The pass key is");
  EXPECT_EQ(passkey_intro().substr(0, 50), "There is an important piece of information hidden ");
}

} // namespace
} // namespace kvtier::compression
