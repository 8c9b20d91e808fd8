// The bundled traces read to the exact figures in sim/traces/README.md.

#include "runtime/error.hpp"
#include "sim/trace.hpp"
#include "trace_test_util.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

trace load(const std::string& file, trace_format fmt = trace_format::auto_detect, trace_read_options options = {}) {
  auto start = std::chrono::steady_clock::now();
  auto t = read_trace(test::bundled(file), fmt, options);
  auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!t) {
    ADD_FAILURE() << describe(t.error());
    return {};
  }
  std::cout << file << ": " << t->requests.size() << " requests loaded in " << ms << " ms\n";
  return std::move(*t);
}

} // namespace

TEST(trace_bundled, mooncake_conversation_figures) {
  auto t = load("mooncake_conversation_trace.jsonl");
  const auto& s = t.stats;
  EXPECT_EQ(t.requests.size(), 12'031u);
  EXPECT_EQ(s.requests, 12'031u);
  EXPECT_EQ(t.skipped_rows, 0u);
  EXPECT_EQ(t.out_of_order_rows, 0u);
  EXPECT_DOUBLE_EQ(s.duration_s, 3536.999);
  EXPECT_NEAR(s.rate_per_s, 3.40, 0.005);
  EXPECT_EQ(s.input_tokens.total, 144'793'823u);
  EXPECT_EQ(std::lround(s.input_tokens.mean), 12'035);
  EXPECT_DOUBLE_EQ(s.input_tokens.p50, 6'909);
  EXPECT_NEAR(s.input_tokens.p99, 85'400.4, 1e-6);
  EXPECT_EQ(s.input_tokens.min, 891u);
  EXPECT_EQ(s.input_tokens.max, 126'195u);
  EXPECT_EQ(s.output_tokens.total, 4'122'048u);
  EXPECT_EQ(std::lround(s.output_tokens.mean), 343);
  EXPECT_DOUBLE_EQ(s.output_tokens.p50, 350);
  EXPECT_NEAR(s.output_tokens.p99, 1'118.5, 1e-6);
  EXPECT_EQ(s.output_tokens.max, 2'000u);
  EXPECT_EQ(s.blocks, 288'500u);
  EXPECT_EQ(s.distinct_blocks, 182'790u);
  EXPECT_EQ(s.tenants, 1u);
  EXPECT_EQ(s.sessions, 0u);

  // Row 17 of the file, as the reader must see it.
  const auto& r = t.requests[16];
  EXPECT_EQ(r.id, 16u);
  EXPECT_DOUBLE_EQ(r.arrival_s, 3.0);
  EXPECT_EQ(r.input_tokens, 915u);
  EXPECT_EQ(r.output_tokens, 355u);
  EXPECT_EQ(r.block_ids, (std::vector<uint64_t>{0, 462}));
  EXPECT_EQ(r.block_tokens, 512u);
  EXPECT_EQ(t.requests.front().arrival_s, 0.0);
  for (const auto& q : t.requests) // ceil(input / 512) blocks on every row
    ASSERT_EQ(q.block_ids.size(), (q.input_tokens + 511) / 512) << "request " << q.id;
}

TEST(trace_bundled, mooncake_ideal_prefix_reuse) {
  auto t = load("mooncake_conversation_trace.jsonl");
  auto reuse = ideal_prefix_reuse(t);
  EXPECT_EQ(reuse.blocks, 288'500u);
  EXPECT_EQ(reuse.hit_blocks, 105'710u);
  EXPECT_NEAR(reuse.block_ratio(), 0.36641, 5e-6);
  EXPECT_EQ(reuse.input_tokens, 144'793'823u);
  EXPECT_EQ(reuse.hit_tokens, 54'098'411u);
  EXPECT_NEAR(reuse.token_ratio(), 0.3736, 5e-5);
}

TEST(trace_bundled, azure_conversation_figures) {
  auto t = load("azure_llm_2023_conv.csv");
  const auto& s = t.stats;
  EXPECT_EQ(s.requests, 19'366u);
  EXPECT_EQ(t.skipped_rows, 0u);
  EXPECT_EQ(t.out_of_order_rows, 0u);
  EXPECT_NEAR(s.duration_s, 3501.7219370, 1e-9);
  EXPECT_NEAR(s.rate_per_s, 5.53, 0.005);
  EXPECT_EQ(s.input_tokens.total, 22'361'870u);
  EXPECT_EQ(std::lround(s.input_tokens.mean), 1'155);
  EXPECT_DOUBLE_EQ(s.input_tokens.p50, 1'020);
  EXPECT_DOUBLE_EQ(s.input_tokens.p99, 4'142);
  EXPECT_EQ(s.input_tokens.max, 14'050u);
  EXPECT_EQ(s.output_tokens.total, 4'088'665u);
  EXPECT_EQ(std::lround(s.output_tokens.mean), 211);
  EXPECT_DOUBLE_EQ(s.output_tokens.p50, 129);
  EXPECT_DOUBLE_EQ(s.output_tokens.p99, 601);
  EXPECT_EQ(s.output_tokens.max, 1'000u);
  EXPECT_EQ(s.blocks, 0u);
  // 18:15:50.9951690 - 18:15:46.6805900, exact to the 100 ns tick.
  EXPECT_NEAR(t.requests[1].arrival_s, 4.314579, 1e-9);
  EXPECT_EQ(t.requests[1].input_tokens, 396u);
  EXPECT_EQ(t.requests[1].output_tokens, 109u);
  EXPECT_TRUE(t.requests[1].block_ids.empty());
  EXPECT_EQ(t.requests[1].block_tokens, 0u);
  // The last row has no newline after it and is read all the same.
  EXPECT_EQ(t.requests.back().input_tokens, 197u);
  EXPECT_EQ(t.requests.back().output_tokens, 183u);
  auto reuse = ideal_prefix_reuse(t);
  EXPECT_EQ(reuse.blocks, 0u);
  EXPECT_EQ(reuse.block_ratio(), 0.0);
}

TEST(trace_bundled, burstgpt_sample_keeps_and_counts_failures) {
  auto t = load("burstgpt_sample.csv");
  EXPECT_EQ(t.stats.requests, 24u);
  EXPECT_EQ(t.failed_requests, 3u); // rows with Response tokens 0
  EXPECT_EQ(t.requests[5].output_tokens, 0u);
  EXPECT_EQ(t.stats.input_tokens.total, 9'150u);
  EXPECT_EQ(t.stats.output_tokens.total, 3'080u);
  // Timestamps 3.500 .. 41.277: the first request is moved to 0.
  EXPECT_EQ(t.requests[0].arrival_s, 0.0);
  EXPECT_NEAR(t.requests[1].arrival_s, 0.483, 1e-12);
  EXPECT_NEAR(t.stats.duration_s, 37.777, 1e-12);
}

TEST(trace_bundled, explicit_format_and_options) {
  trace_read_options options;
  options.max_requests = 100;
  options.time_scale = 0.5;
  auto t = load("mooncake_conversation_trace.jsonl", trace_format::mooncake, options);
  ASSERT_EQ(t.requests.size(), 100u);
  EXPECT_EQ(t.requests.back().id, 99u);
  // Row 17 arrives at 3 s; at time_scale 0.5 at 1.5 s.
  EXPECT_DOUBLE_EQ(t.requests[16].arrival_s, 1.5);

  auto wrong = read_trace(test::bundled("azure_llm_2023_conv.csv"), trace_format::burstgpt);
  ASSERT_FALSE(wrong);
  EXPECT_TRUE(is(wrong.error(), errc::invalid_trace));
  EXPECT_EQ(describe(wrong.error()),
            test::bundled("azure_llm_2023_conv.csv") +
                ":1: expected the header Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type, got "
                "\"TIMESTAMP,ContextTokens,GeneratedTokens\"");
}

TEST(trace_bundled, default_trace_path) {
  const char* saved = std::getenv("KVTIER_DATA_DIR");
  std::string old = saved ? saved : "";
  ::unsetenv("KVTIER_DATA_DIR");
  EXPECT_EQ(default_trace_path(),
            std::string(build_info::source_dir) + "/sim/traces/mooncake_conversation_trace.jsonl");
  EXPECT_TRUE(read_trace(default_trace_path(), trace_format::auto_detect, {.max_requests = 1}));
  ::setenv("KVTIER_DATA_DIR", "/data/traces", 1);
  EXPECT_EQ(default_trace_path(), "/data/traces/mooncake_conversation_trace.jsonl");
  EXPECT_EQ(bundled_trace_dir(), "/data/traces");
  ::setenv("KVTIER_DATA_DIR", "", 1); // empty = unset
  EXPECT_EQ(bundled_trace_dir(), std::string(build_info::source_dir) + "/sim/traces");
  if (saved)
    ::setenv("KVTIER_DATA_DIR", old.c_str(), 1);
  else
    ::unsetenv("KVTIER_DATA_DIR");
}

TEST(trace_bundled, files_are_the_published_sizes) {
  // sim/traces/README.md has the git blob ids; sizes catch a line-ending conversion.
  EXPECT_EQ(std::filesystem::file_size(test::bundled("mooncake_conversation_trace.jsonl")), 3'029'533u);
  EXPECT_EQ(std::filesystem::file_size(test::bundled("azure_llm_2023_conv.csv")), 719'188u);
}

TEST(trace_bundled, missing_file_is_an_io_error) {
  auto t = read_trace("/nonexistent/trace.jsonl", trace_format::auto_detect);
  ASSERT_FALSE(t);
  EXPECT_TRUE(is(t.error(), errc::io_failure));
  EXPECT_EQ(describe(t.error()), "/nonexistent/trace.jsonl: cannot open trace: No such file or directory");
}
