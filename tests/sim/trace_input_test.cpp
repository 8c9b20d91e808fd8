// Trace input as an unlucky user hands it over: directories, devices, files
// with no line ends, huge files read for a few requests, arrival times the
// simulator's clock cannot hold, and synthetic traces cut to max_requests.

#include "runtime/error.hpp"
#include "sim/line_source.hpp"
#include "runtime/synthetic_spec.hpp"
#include "sim/trace.hpp"
#include "trace_test_util.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

// A fresh, empty folder under the system's temporary directory.
std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / fmt::format("kvtier-{}-{}", name, ::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  ASSERT_TRUE(out) << path;
}

std::string row(uint64_t timestamp_ms, uint32_t input = 600) {
  return fmt::format(R"({{"timestamp": {}, "input_length": {}, "output_length": 7, "hash_ids": [1, 2]}})", timestamp_ms,
                     input);
}

// Bytes this process has asked read() for so far (Linux /proc/self/io).
uint64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "rchar:")
      return value;
  ADD_FAILURE() << "no rchar in /proc/self/io";
  return 0;
}

std::string error_of(const caf::expected<trace>& t) {
  return t ? "ok" : describe(t.error());
}

bool same(const trace_request& a, const trace_request& b) {
  return a.id == b.id && a.arrival_s == b.arrival_s && a.input_tokens == b.input_tokens &&
      a.output_tokens == b.output_tokens && a.block_ids == b.block_ids && a.block_tokens == b.block_tokens &&
      a.tenant == b.tenant && a.session == b.session;
}

} // namespace

TEST(trace_input, a_directory_is_refused_not_thrown) {
  auto dir = scratch_dir("trace-dir");
  auto t = read_trace(dir.string(), trace_format::auto_detect);
  ASSERT_FALSE(t);
  EXPECT_TRUE(is(t.error(), errc::io_failure));
  EXPECT_EQ(describe(t.error()),
            dir.string() + ": cannot open trace: it is a directory (traces are read from regular files or pipes)");
  std::filesystem::remove_all(dir);
}

TEST(trace_input, a_device_is_refused_before_reading) {
  for (auto fmt : {trace_format::auto_detect, trace_format::mooncake, trace_format::azure}) {
    auto t = read_trace("/dev/zero", fmt);
    EXPECT_EQ(error_of(t),
              "/dev/zero: cannot open trace: it is a character device (traces are read from regular "
              "files or pipes)");
  }
}

TEST(trace_input, a_line_without_end_is_bounded) {
  auto dir = scratch_dir("trace-long-line");
  auto path = (dir / "zeros.jsonl").string();
  write(path, row(0) + "\n" + std::string(detail::max_line_bytes + 1, '\0'));
  EXPECT_EQ(error_of(read_trace(path, trace_format::auto_detect)),
            path + ":2: line longer than 16 MiB; is this a trace file?");
  // The same bytes under max_requests = 1 never reach the long line.
  auto t = read_trace(path, trace_format::auto_detect, {.max_requests = 1});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests.size(), 1u);
  std::filesystem::remove_all(dir);
}

TEST(trace_input, max_requests_stops_reading) {
  auto dir = scratch_dir("trace-big");
  auto path = (dir / "big.jsonl").string();
  std::string text;
  for (uint64_t i = 0; text.size() < (uint64_t{16} << 20); ++i)
    text += row(i * 10) + "\n";
  write(path, text);
  uint64_t before = bytes_read_so_far();
  auto t = read_trace(path, trace_format::auto_detect, {.max_requests = 50});
  uint64_t read = bytes_read_so_far() - before;
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests.size(), 50u);
  EXPECT_EQ(t->requests.back().arrival_s, 0.49);
  // 50 rows are 4 KB; one read of 64 KiB holds them (and /proc/self/io itself is a few hundred bytes).
  EXPECT_LT(read, uint64_t{1} << 20) << "of a " << text.size() << "-byte file";
  std::filesystem::remove_all(dir);
}

TEST(trace_input, file_reads_equal_memory_parses) {
  // Lines that straddle the reader's 64 KiB chunks, CRLF ends, a byte-order
  // mark, blank lines and a last line without its newline.
  std::string text = "\xEF\xBB\xBF";
  for (uint32_t i = 0; i < 3000; ++i)
    text += row(i * 3, 1024 + i % 700) + (i % 7 == 0 ? "\r\n" : "\n") + (i % 11 == 0 ? "\n" : "");
  text += row(99999);
  auto dir = scratch_dir("trace-chunks");
  auto path = (dir / "t.jsonl").string();
  write(path, text);
  auto from_file = read_trace(path, trace_format::mooncake);
  auto from_memory = parse_trace(text, path, trace_format::mooncake);
  ASSERT_TRUE(from_file) << describe(from_file.error());
  ASSERT_TRUE(from_memory) << describe(from_memory.error());
  ASSERT_EQ(from_file->requests.size(), 3001u);
  ASSERT_EQ(from_memory->requests.size(), 3001u);
  for (size_t i = 0; i < 3001; ++i)
    EXPECT_TRUE(same(from_file->requests[i], from_memory->requests[i])) << i;
  std::filesystem::remove_all(dir);
}

TEST(trace_input, csv_format_is_detected_from_a_file) {
  auto dir = scratch_dir("trace-csv");
  auto path = (dir / "azure").string(); // no extension: the header decides
  write(path,
        "\nTIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\nbroken\n");
  EXPECT_EQ(error_of(read_trace(path, trace_format::auto_detect)),
            path + ":5: expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), got 1");
  auto t = read_trace(path, trace_format::auto_detect, {.max_requests = 2});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests.size(), 2u);
  EXPECT_EQ(t->requests[1].input_tokens, 396u);
  std::filesystem::remove_all(dir);
}

TEST(trace_input, arrivals_past_the_clock_are_refused) {
  // Three hours of trace at time_scale 1e6 is 1.08e10 s: past the int64-nanosecond clock's reach.
  std::string text = row(0) + "\n" + row(5000) + "\n" + row(10'800'000) + "\n";
  auto t = parse_trace(text, "t.jsonl", trace_format::mooncake, {.time_scale = 1e6});
  EXPECT_EQ(error_of(t),
            "t.jsonl:3: arrives 10800 s after the first request; at time_scale 1e+06 that is 1.08e+10 s, "
            "past the simulator's limit of 1e+09 s (about 32 years)");
  EXPECT_TRUE(parse_trace(text, "t.jsonl", trace_format::mooncake, {.time_scale = 9e4}));
  EXPECT_TRUE(parse_trace(text, "t.jsonl", trace_format::mooncake, {.max_requests = 2, .time_scale = 1e6}));
}

TEST(trace_input, bundled_trace_is_compiled_in) {
  auto embedded = parse_trace(bundled_trace_text(), bundled_trace_name, trace_format::mooncake, {.max_requests = 5});
  auto file =
      read_trace(test::bundled("mooncake_conversation_trace.jsonl"), trace_format::mooncake, {.max_requests = 5});
  ASSERT_TRUE(embedded) << describe(embedded.error());
  ASSERT_TRUE(file) << describe(file.error());
  EXPECT_EQ(bundled_trace_text().size(), 3'029'533u);
  EXPECT_EQ(embedded->source, "<built-in>/sim/traces/mooncake_conversation_trace.jsonl");
  for (size_t i = 0; i < 5; ++i)
    EXPECT_TRUE(same(embedded->requests[i], file->requests[i])) << i;
}

TEST(trace_input, synthetic_honours_max_requests) {
  synthetic_spec spec;
  spec.requests = 100'000'000; // 1e8: some 10 GB if it were generated whole
  spec.turns_per_session = 4;
  spec.think_time_s = 30;
  auto t = generate_synthetic(spec, {.max_requests = 50});
  ASSERT_TRUE(t) << describe(t.error());
  EXPECT_EQ(t->requests.size(), 50u);
  EXPECT_EQ(t->stats.requests, 50u);

  // The first N of a trace are exactly the first N by arrival of the whole trace.
  spec.requests = 3000;
  auto whole = generate_synthetic(spec);
  auto first = generate_synthetic(spec, {.max_requests = 700});
  ASSERT_TRUE(whole && first);
  ASSERT_EQ(first->requests.size(), 700u);
  for (size_t i = 0; i < 700; ++i)
    EXPECT_TRUE(same(first->requests[i], whole->requests[i])) << i;
}

TEST(trace_input, synthetic_time_scale_and_clock_limit) {
  synthetic_spec spec;
  spec.requests = 20;
  auto whole = generate_synthetic(spec);
  auto scaled = generate_synthetic(spec, {.time_scale = 0.5});
  ASSERT_TRUE(whole && scaled);
  for (size_t i = 0; i < 20; ++i)
    EXPECT_EQ(scaled->requests[i].arrival_s, whole->requests[i].arrival_s * 0.5) << i;
  spec.rate_per_s = 1e-9; // one request every 31 years on average
  auto t = generate_synthetic(spec);
  ASSERT_FALSE(t);
  EXPECT_TRUE(describe(t.error()).starts_with("synthetic: request ")) << describe(t.error());
  EXPECT_TRUE(describe(t.error()).ends_with("past the simulator's limit of 1e+09 s (about 32 years)"))
      << describe(t.error());
}
