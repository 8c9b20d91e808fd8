// Bad input: exact messages, skip_bad, format detection, and garbage that
// must never crash a reader.

#include "runtime/error.hpp"
#include "sim/trace.hpp"
#include "sim/trace_builder.hpp"

#include <gtest/gtest.h>

#include <random>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

const std::string good_row = R"({"timestamp": 3000, "input_length": 915, "output_length": 355, "hash_ids": [0, 462]})";

// The error message of parsing `text`, or "ok".
std::string error_of(std::string_view text, const std::string& name, trace_format fmt = trace_format::auto_detect,
                     trace_read_options options = {}) {
  auto t = parse_trace(text, name, fmt, options);
  if (t)
    return "ok";
  EXPECT_TRUE(is(t.error(), errc::invalid_trace) || is(t.error(), errc::invalid_argument)) << describe(t.error());
  return describe(t.error());
}

std::string mooncake_with(uint64_t line, const std::string& row) {
  std::string text;
  for (uint64_t i = 1; i < line; ++i)
    text += good_row + "\n";
  return text + row + "\n" + good_row + "\n";
}

} // namespace

TEST(trace_errors, mooncake_messages_name_file_line_and_field) {
  EXPECT_EQ(
      error_of(mooncake_with(17, R"({"timestamp": 0, "input_length": "abc", "output_length": 1, "hash_ids": []})"),
               "trace.jsonl"),
      R"(trace.jsonl:17: "input_length": expected a non-negative integer, got "abc")");
  EXPECT_EQ(error_of(mooncake_with(2, R"({"timestamp": 0, "input_length": -5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:2: "input_length": expected a non-negative integer, got -5)");
  EXPECT_EQ(error_of(mooncake_with(2, R"({"timestamp": 0, "input_length": 1.5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:2: "input_length": expected a non-negative integer, got 1.5)");
  EXPECT_EQ(
      error_of(mooncake_with(1, R"({"timestamp": 0, "input_length": 5000000000, "output_length": 1})"), "t.jsonl"),
      R"(t.jsonl:1: "input_length": 5000000000 is too large (at most 4294967295))");
  EXPECT_EQ(error_of(mooncake_with(3, R"({"timestamp": 0, "input_length": 5})"), "t.jsonl"),
            R"(t.jsonl:3: missing "output_length")");
  EXPECT_EQ(error_of(mooncake_with(1, R"({"input_length": 5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:1: missing "timestamp")");
  EXPECT_EQ(error_of(mooncake_with(1, R"({"timestamp": -1, "input_length": 5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:1: "timestamp": expected non-negative milliseconds, got -1)");
  EXPECT_EQ(error_of(mooncake_with(1, R"({"timestamp": "noon", "input_length": 5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:1: "timestamp": expected non-negative milliseconds, got "noon")");
  EXPECT_EQ(error_of(mooncake_with(1, R"({"timestamp": 1e300, "input_length": 5, "output_length": 1})"), "t.jsonl"),
            R"(t.jsonl:1: "timestamp": expected non-negative milliseconds, got 1e+300)");
  EXPECT_EQ(error_of(mooncake_with(4, R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": 7})"),
                     "t.jsonl"),
            R"(t.jsonl:4: "hash_ids": expected an array of non-negative integers, got 7)");
  EXPECT_EQ(
      error_of(mooncake_with(4, R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, "x"]})"),
               "t.jsonl"),
      R"(t.jsonl:4: "hash_ids"[1]: expected a non-negative integer, got "x")");
  EXPECT_EQ(
      error_of(mooncake_with(4, R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1, 2]})"),
               "t.jsonl"),
      R"(t.jsonl:4: "hash_ids": 3 blocks of 512 tokens is more than input_length 600 needs (2))");
  EXPECT_EQ(error_of(mooncake_with(2, R"({"timestamp": 1e400, "input_length": 1, "output_length": 1})"), "t.jsonl"),
            "t.jsonl:2: invalid JSON: number overflow parsing '1e400'");
  EXPECT_EQ(error_of(mooncake_with(2, "[1, 2]"), "t.jsonl"), "t.jsonl:2: expected a JSON object, got [1,2]");
  EXPECT_EQ(error_of(mooncake_with(2, R"({"timestamp": 0, "input_len)"), "t.jsonl"),
            "t.jsonl:2: invalid JSON at column 28: syntax error while parsing object key - invalid string: missing "
            "closing quote; last read: '\"input_len'; expected string literal");
  EXPECT_EQ(error_of(mooncake_with(2, good_row + " x"), "t.jsonl"),
            "t.jsonl:2: invalid JSON at column 86: syntax error while parsing value - invalid literal; last read: "
            "'462]} x'; expected end of input");
}

TEST(trace_errors, mooncake_tolerates_blank_lines_crlf_extra_keys_and_no_hash_ids) {
  std::string text = "\xEF\xBB\xBF" + good_row + "\r\n\r\n   \n" +
      R"({"timestamp": 4500.5, "input_length": 10, "output_length": 2, "session": "x"})";
  auto t = parse_trace(text, "t.jsonl", trace_format::mooncake);
  ASSERT_TRUE(t) << describe(t.error());
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[0].block_ids, (std::vector<uint64_t>{0, 462}));
  EXPECT_DOUBLE_EQ(t->requests[1].arrival_s, 1.5005);
  EXPECT_TRUE(t->requests[1].block_ids.empty());
  EXPECT_EQ(t->requests[1].block_tokens, 0u);
}

TEST(trace_errors, mooncake_block_tokens_option) {
  std::string row = R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, 1, 2]})";
  auto t = parse_trace(row, "t.jsonl", trace_format::mooncake, {.block_tokens = 256});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests[0].block_tokens, 256u);
  EXPECT_EQ(ideal_prefix_reuse(*t).blocks, 3u);
}

TEST(trace_errors, azure_messages) {
  std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  std::string row = "2023-11-16 18:15:46.6805900,374,44\n";
  EXPECT_EQ(error_of(header + row + row + row + "2023-11-16 18:15:47.0,12\n", "conv.csv"),
            "conv.csv:5: expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), got 2");
  EXPECT_EQ(error_of(header + "2023-11-16 25:15:46.6805900,374,44", "conv.csv"),
            "conv.csv:2: TIMESTAMP: expected a time like 2023-11-16 18:17:03.9799600, got \"2023-11-16 "
            "25:15:46.6805900\"");
  EXPECT_EQ(error_of(header + "2023-02-29 00:00:00,1,1", "conv.csv"),
            "conv.csv:2: TIMESTAMP: expected a time like 2023-11-16 18:17:03.9799600, got \"2023-02-29 00:00:00\"");
  EXPECT_EQ(error_of(header + "2023-11-16 18:15:46.6805900,abc,44", "conv.csv"),
            "conv.csv:2: ContextTokens: expected a non-negative integer, got \"abc\"");
  EXPECT_EQ(error_of(header + "2023-11-16 18:15:46.6805900,12,-4", "conv.csv"),
            "conv.csv:2: GeneratedTokens: expected a non-negative integer, got \"-4\"");
  EXPECT_EQ(error_of(header + "2023-11-16 18:15:46.6805900,99999999999,4", "conv.csv"),
            "conv.csv:2: ContextTokens: 99999999999 is too large (at most 4294967295)");
  EXPECT_EQ(error_of("TIMESTAMP,Context,GeneratedTokens\n" + row, "conv.csv", trace_format::azure),
            "conv.csv:1: expected the header TIMESTAMP,ContextTokens,GeneratedTokens, got "
            "\"TIMESTAMP,Context,GeneratedTokens\"");
  EXPECT_EQ(error_of(header, "conv.csv"), "conv.csv: the trace has no requests");
  EXPECT_EQ(error_of("", "conv.csv", trace_format::azure), "conv.csv: the trace has no requests (empty file)");
}

TEST(trace_errors, azure_timestamps) {
  using detail::parse_timestamp_ns;
  EXPECT_EQ(parse_timestamp_ns("1970-01-01 00:00:00"), 0);
  EXPECT_EQ(parse_timestamp_ns("1970-01-01 00:00:01.5"), 1'500'000'000);
  EXPECT_EQ(parse_timestamp_ns("2023-11-16 18:17:03.9799600"), 1'700'158'623'979'960'000);
  EXPECT_EQ(parse_timestamp_ns("2023-11-16T18:17:03.9799600Z"), 1'700'158'623'979'960'000);
  EXPECT_EQ(parse_timestamp_ns("2023-11-16 20:17:03.9799600+02:00"), 1'700'158'623'979'960'000);
  EXPECT_EQ(parse_timestamp_ns("2024-02-29 00:00:00.123456789123"), 1'709'164'800'123'456'789);
  EXPECT_FALSE(parse_timestamp_ns("2023-11-16 18:17"));
  EXPECT_FALSE(parse_timestamp_ns("2023-11-16 18:17:03."));
  EXPECT_FALSE(parse_timestamp_ns("2023-13-16 18:17:03"));
  EXPECT_FALSE(parse_timestamp_ns("2023-11-16 18:17:03 UTC"));
  EXPECT_FALSE(parse_timestamp_ns("2023/11/16 18:17:03"));
  EXPECT_FALSE(parse_timestamp_ns("9999-12-31 23:59:59")); // would overflow int64 nanoseconds
  EXPECT_FALSE(parse_timestamp_ns("1969-12-31 23:59:59"));
  EXPECT_EQ(parse_timestamp_ns("2199-12-31 23:59:59"), 7'258'118'399'000'000'000);
}

TEST(trace_errors, burstgpt_messages) {
  std::string header = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
  EXPECT_EQ(
      error_of(header + "5,ChatGPT,10,20,30\n", "b.csv"),
      "b.csv:2: expected 6 columns (Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type), got 5");
  EXPECT_EQ(error_of(header + "-5,ChatGPT,10,20,30,API log\n", "b.csv"),
            "b.csv:2: Timestamp: expected non-negative seconds, got \"-5\"");
  EXPECT_EQ(error_of(header + "nan,ChatGPT,10,20,30,API log\n", "b.csv"),
            "b.csv:2: Timestamp: expected non-negative seconds, got \"nan\"");
  EXPECT_EQ(error_of(header + "5,,10,20,30,API log\n", "b.csv"),
            "b.csv:2: Model: expected a model name, got an empty field");
  EXPECT_EQ(error_of(header + "5,GPT-4,10,x,30,API log\n", "b.csv"),
            "b.csv:2: Response tokens: expected a non-negative integer, got \"x\"");
  EXPECT_EQ(error_of(header + "5,GPT-4,10,20,30,\n", "b.csv"),
            "b.csv:2: Log Type: expected a log type such as \"Conversation log\", got an empty field");
  auto t = parse_trace(header + "5,GPT-4,10,0,10,API log\n7.25,ChatGPT,3,4,7,Conversation log", "b.csv",
                       trace_format::auto_detect);
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->failed_requests, 1u);
  EXPECT_DOUBLE_EQ(t->requests[1].arrival_s, 2.25);
}

TEST(trace_errors, skip_bad_counts_and_keeps_the_first_examples) {
  std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  std::string text = header;
  for (int i = 0; i < 10; ++i)
    text += "2023-11-16 18:15:46.0,1,1\n" + std::string(i % 2 ? "garbage\n" : "2023-11-16 18:15:47.0,x,1\n");
  EXPECT_EQ(error_of(text, "conv.csv"), "conv.csv:3: ContextTokens: expected a non-negative integer, got \"x\"");
  auto t = parse_trace(text, "conv.csv", trace_format::azure, {.skip_bad = true});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests.size(), 10u);
  EXPECT_EQ(t->skipped_rows, 10u);
  ASSERT_EQ(t->skipped_examples.size(), max_skipped_examples);
  EXPECT_EQ(t->skipped_examples[0], "conv.csv:3: ContextTokens: expected a non-negative integer, got \"x\"");
  EXPECT_EQ(t->skipped_examples[1], "conv.csv:5: expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), got 1");
  EXPECT_EQ(t->skipped_examples[4], "conv.csv:11: ContextTokens: expected a non-negative integer, got \"x\"");

  EXPECT_EQ(error_of(header + "a\nb\n", "conv.csv", trace_format::azure, {.skip_bad = true}),
            "conv.csv: no valid rows (2 skipped; first: conv.csv:2: expected 3 columns "
            "(TIMESTAMP,ContextTokens,GeneratedTokens), got 1)");
}

TEST(trace_errors, out_of_order_rows_are_counted_and_arrivals_stay_non_negative) {
  std::string text = R"({"timestamp": 5000, "input_length": 1, "output_length": 1})"
                     "\n"
                     R"({"timestamp": 2000, "input_length": 1, "output_length": 1})";
  auto t = parse_trace(text, "t.jsonl", trace_format::mooncake);
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->out_of_order_rows, 1u);
  EXPECT_DOUBLE_EQ(t->requests[0].arrival_s, 3.0);
  EXPECT_DOUBLE_EQ(t->requests[1].arrival_s, 0.0);
}

TEST(trace_errors, options_are_checked) {
  EXPECT_EQ(error_of(good_row, "t.jsonl", trace_format::mooncake, {.time_scale = 0}),
            "trace time_scale: expected a positive number, got 0");
  EXPECT_EQ(error_of(good_row, "t.jsonl", trace_format::mooncake, {.block_tokens = 0}),
            "trace block_tokens: expected a positive integer, got 0");
  EXPECT_EQ(*parse_trace_format("burstgpt"), trace_format::burstgpt);
  EXPECT_EQ(*parse_trace_format("auto"), trace_format::auto_detect);
  EXPECT_EQ(describe(parse_trace_format("csv").error()),
            "unknown trace format \"csv\": expected auto, mooncake, azure or burstgpt");
}

TEST(trace_errors, format_detection) {
  EXPECT_EQ(*detect_trace_format("anything", "x.jsonl"), trace_format::mooncake);
  EXPECT_EQ(*detect_trace_format("\n  {\"timestamp\": 0}", "x.txt"), trace_format::mooncake);
  EXPECT_EQ(*detect_trace_format("TIMESTAMP,ContextTokens,GeneratedTokens\r\n", "x.csv"), trace_format::azure);
  EXPECT_EQ(*detect_trace_format("timestamp,contexttokens,generatedtokens", "x"), trace_format::azure);
  EXPECT_EQ(*detect_trace_format("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type", "x.csv"),
            trace_format::burstgpt);
  EXPECT_EQ(describe(detect_trace_format("\ntime,tokens\n", "x.csv").error()),
            "x.csv:2: cannot tell the trace format from \"time,tokens\": expected a Mooncake JSON object, the Azure "
            "header TIMESTAMP,ContextTokens,GeneratedTokens or the BurstGPT header Timestamp,Model,Request "
            "tokens,Response tokens,Total tokens,Log Type");
  EXPECT_EQ(describe(detect_trace_format("", "x.csv").error()), "x.csv: the trace has no requests (empty file)");
}

// Every prefix of a valid row, and random bytes, in each format: a value, never a crash.
TEST(trace_errors, garbage_and_truncated_lines_never_crash) {
  const std::vector<std::pair<std::string, std::string>> samples = {
      {"g.jsonl", good_row},
      {"g.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44"},
      {"g.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5.5,GPT-4,10,20,30,API log"},
  };
  std::mt19937_64 rng(42);
  uint64_t parsed = 0, failed = 0;
  for (const auto& [name, text] : samples) {
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      for (bool skip : {false, true}) {
        auto t = parse_trace(text.substr(0, cut), name, trace_format::auto_detect, {.skip_bad = skip});
        (t ? parsed : failed)++;
        if (!t) {
          EXPECT_FALSE(describe(t.error()).empty());
        }
      }
    }
    for (int round = 0; round < 300; ++round) {
      std::string mutated = text;
      for (int k = 0; k < 1 + round % 5; ++k)
        mutated[rng() % mutated.size()] = static_cast<char>(rng() % 256);
      auto t = parse_trace(mutated + "\n" + mutated.substr(0, rng() % mutated.size()), name, trace_format::auto_detect,
                           {.skip_bad = true});
      (t ? parsed : failed)++;
    }
  }
  std::string noise(4096, '\0');
  for (auto& c : noise)
    c = static_cast<char>(rng() % 256);
  for (auto fmt : {trace_format::auto_detect, trace_format::mooncake, trace_format::azure, trace_format::burstgpt}) {
    EXPECT_FALSE(parse_trace(noise, "noise.bin", fmt));
    auto skipped = parse_trace(noise, "noise.bin", fmt, {.skip_bad = true});
    EXPECT_FALSE(skipped);
  }
  EXPECT_GT(parsed, 0u);
  EXPECT_GT(failed, 0u);
}

// Rows that are wrong in every way we could think of: each is skipped and counted.
TEST(trace_errors, nasty_rows_are_each_skipped) {
  const std::vector<std::string> mooncake_rows = {
      "null",
      "{}",
      "[]",
      "\"text\"",
      "42",
      "{",
      "}",
      "{\"timestamp\": null, \"input_length\": 1, \"output_length\": 1}",
      R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1e400]})",
      R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [-1]})",
      R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [[1]]})",
      R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": {"a": 1}})",
      R"({"timestamp": 0, "input_length": 99999999999999999999999, "output_length": 1})",
      R"({"timestamp": 0, "input_length": true, "output_length": 1})",
      R"({"timestamp": 0, "input_length": 1, "output_length": {"x": 1}})",
      R"({"timestamp": 1e400, "input_length": 1, "output_length": 1})",
      R"({"timestamp": 18446744073709551615, "input_length": 1, "output_length": 1})",
      std::string("{\"timestamp\": 0,\0 \"input_length\": 1}", 34),
      std::string(100'000, '['),
      "\xff\xfe\xfd",
  };
  std::string text;
  for (const auto& row : mooncake_rows)
    text += row + "\n" + good_row + "\n";
  auto t = parse_trace(text, "nasty.jsonl", trace_format::mooncake, {.skip_bad = true});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->skipped_rows, mooncake_rows.size());
  EXPECT_EQ(t->requests.size(), mooncake_rows.size());

  const std::vector<std::string> azure_rows = {
      ",,",
      ",,,",
      "\"2023-11-16 18:15:46\",1,1",
      "2023-11-16 18:15:46,1,1,",
      "2023-11-16 18:15:46,+1,1",
      "2023-11-16 18:15:46,1 1,1",
      "2023-11-16 18:15:46,0x10,1",
      std::string("2023-11-16 18:15:46,1\0,1", 24),
      "2023-11-16 18:15:46.,1,1",
      "2023-11-16 18:15:46.12a,1,1",
      "2023-11-16 18:15:46+25:00,1,1",
      "2023-11-16 18:15:46+01:00x,1,1",
      "0000-00-00 00:00:00,1,1",
      std::string(100'000, ','),
  };
  text = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (const auto& row : azure_rows)
    text += row + "\n2023-11-16 18:15:46.5,1,1\n";
  t = parse_trace(text, "nasty.csv", trace_format::auto_detect, {.skip_bad = true});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->skipped_rows, azure_rows.size());
  EXPECT_EQ(t->requests.size(), azure_rows.size());

  const std::vector<std::string> burst_rows = {
      ",,,,,",
      "inf,GPT-4,1,1,2,API log",
      "1e300,GPT-4,1,1,2,API log",
      "0x5,GPT-4,1,1,2,API log",
      "5,GPT-4,1,1,-2,API log",
      "5,GPT-4,1,1,2,API log,extra",
      "5.5.5,GPT-4,1,1,2,API log",
  };
  text = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
  for (const auto& row : burst_rows)
    text += row + "\n1,ChatGPT,3,4,7,Conversation log\n";
  t = parse_trace(text, "nasty.csv", trace_format::auto_detect, {.skip_bad = true});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->skipped_rows, burst_rows.size());
  EXPECT_EQ(t->requests.size(), burst_rows.size());
}
