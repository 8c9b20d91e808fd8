#pragma once
// Request traces for the simulator: readers for public LLM-serving traces
// (Mooncake JSONL, Azure LLM CSV, BurstGPT CSV), a seeded synthetic
// generator, and the figures every trace is judged by (token statistics and
// the ideal prefix hit ratio).
//
// Plain C++, no actors, no virtual time: a trace is a list of requests with
// arrival times in seconds; the simulator decides what happens to them.
//
// Invariants of a trace returned by read_trace / generate_synthetic:
//  (1) requests[i].id == i (file order for files, arrival order for synthetic);
//  (2) the earliest arrival_s is 0 and every arrival_s is >= 0;
//  (3) for traces with block ids, block_ids.size() <= ceil(input_tokens / block_tokens);
//  (4) every arrival_s is <= max_arrival_s, so the simulator's clock can hold it.
// Readers never crash on malformed input: a bad row is an error value naming
// file:line and what was wrong, or (skip_bad) a counted, skipped row. Files
// are read line by line as the reader needs them (sim/line_source.hpp):
// max_requests stops the reading, and no input grows memory past one line
// of at most 16 MiB; directories and devices are refused.

#include "runtime/synthetic_spec.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::sim {

using kvtier::synthetic_spec; // runtime/synthetic_spec.hpp

struct trace_request {
  uint64_t id = 0;      // 0..n-1 in file order
  double arrival_s = 0; // seconds from the trace's first request (first = 0)
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  std::vector<uint64_t> block_ids; // external prefix-block ids, each covering `block_tokens` tokens; empty if none
  uint32_t block_tokens = 0;       // tokens per block_ids entry (0 if none)
  uint64_t tenant = 0;             // salt id; 0 = shared
  uint64_t session = 0;            // multi-turn session id (synthetic), 0 = none
};

/// Distribution summary of one per-request quantity. Percentiles interpolate
/// linearly between order statistics (numpy's default), so p50 of {1, 2} is 1.5.
struct value_stats {
  double mean = 0;
  double p50 = 0;
  double p99 = 0;
  uint64_t min = 0;
  uint64_t max = 0;
  uint64_t total = 0;
};

struct trace_stats {
  uint64_t requests = 0;
  double duration_s = 0; // last arrival - first arrival
  double rate_per_s = 0; // requests / duration_s (0 when duration is 0)
  value_stats input_tokens;
  value_stats output_tokens;
  uint64_t blocks = 0;          // sum of block_ids sizes
  uint64_t distinct_blocks = 0; // distinct (tenant, block id) pairs
  uint64_t sessions = 0;        // distinct non-zero session ids
  uint64_t tenants = 0;         // distinct tenant ids (0 included)
};

struct trace {
  std::string source; // file path, or "synthetic(seed=N)"
  std::vector<trace_request> requests;
  uint64_t skipped_rows = 0;                 // bad rows skipped under skip_bad
  std::vector<std::string> skipped_examples; // the first few skip reasons, "file:line: what"
  uint64_t failed_requests = 0;              // BurstGPT rows with Response tokens 0 (kept)
  uint64_t out_of_order_rows = 0;            // rows that arrive before the row above them
  trace_stats stats;                         // of `requests` as read
};

enum class trace_format : uint8_t { auto_detect, mooncake, azure, burstgpt };

const char* to_string(trace_format fmt);
/// "auto", "mooncake", "azure" or "burstgpt".
caf::expected<trace_format> parse_trace_format(std::string_view text);

struct trace_read_options {
  bool skip_bad = false;       // skip and count bad rows instead of failing on the first
  uint64_t max_requests = 0;   // stop after this many requests; 0 = all
  double time_scale = 1.0;     // arrival-time multiplier (0.5 = twice the load); > 0
  uint32_t block_tokens = 512; // tokens per Mooncake hash_ids entry
};

/// The latest arrival a trace may have, in seconds after its first request
/// with time_scale applied: about 31.7 years. A later one is refused where the
/// trace is built (naming its file:line), because the simulator's clock is
/// int64 nanoseconds (sim/virtual_clock.hpp) and must also hold the run after it.
inline constexpr double max_arrival_s = 1e9;

/// How many skip reasons a trace keeps in skipped_examples.
inline constexpr size_t max_skipped_examples = 5;

/// Reads a trace file (a regular file or a pipe). `auto_detect` picks the
/// format from the extension (.jsonl/.json = Mooncake) or the first line (the
/// CSV headers, or '{'). Errors: errc::io_failure (cannot open or read; not a
/// regular file or pipe), errc::invalid_trace (bad row, unknown format, a line
/// over 16 MiB, an arrival past max_arrival_s), errc::invalid_argument (bad options).
[[nodiscard]] caf::expected<trace> read_trace(const std::string& path, trace_format fmt,
                                              const trace_read_options& options = {});

/// Parses trace text already in memory; `name` stands for the file in errors.
/// `fmt` may be auto_detect (then `name`'s extension and the first line decide).
[[nodiscard]] caf::expected<trace> parse_trace(std::string_view text, const std::string& name, trace_format fmt,
                                               const trace_read_options& options = {});

/// Detects the format of `text` (file named `name`), or fails naming the first line.
[[nodiscard]] caf::expected<trace_format> detect_trace_format(std::string_view text, const std::string& name);

/// A seeded, deterministic synthetic trace (see runtime/synthetic_spec.hpp; sim/synthetic.cpp).
/// options.max_requests keeps the first N requests by arrival -- exactly the
/// first N of the whole trace -- generating little more than those;
/// options.time_scale multiplies arrival times; skip_bad and block_tokens do
/// not apply. Errors: errc::invalid_argument for a bad spec or options, or an
/// arrival past max_arrival_s.
[[nodiscard]] caf::expected<trace> generate_synthetic(const synthetic_spec& spec,
                                                      const trace_read_options& options = {});

/// Requests, duration and token statistics of `requests`.
trace_stats compute_stats(const std::vector<trace_request>& requests);

/// Prefix reuse with unbounded cache capacity: a block is a hit when a
/// request earlier in the list had the same (tenant, chain of block ids up to
/// and including it). Mooncake's hash_ids are already chained, so there this
/// equals "the id was seen before".
struct prefix_reuse {
  uint64_t blocks = 0; // block_ids entries
  uint64_t hit_blocks = 0;
  uint64_t input_tokens = 0; // all requests' input tokens
  uint64_t hit_tokens = 0;   // tokens covered by hit blocks (a partial last block counts its tokens)

  double block_ratio() const { return blocks ? double(hit_blocks) / double(blocks) : 0.0; }
  double token_ratio() const { return input_tokens ? double(hit_tokens) / double(input_tokens) : 0.0; }
};
prefix_reuse ideal_prefix_reuse(const trace& t);

/// The bundled Mooncake conversation trace, compiled into the binary (so a
/// copied or installed kvtier needs no data files), and the name it goes by.
std::string_view bundled_trace_text();
inline constexpr const char* bundled_trace_name = "<built-in>/sim/traces/mooncake_conversation_trace.jsonl";

/// The trace a run replays when it names none: the file at
/// default_trace_path() when KVTIER_DATA_DIR is set and not empty, else the
/// compiled-in copy (bundled_trace_text()).
[[nodiscard]] caf::expected<trace> read_default_trace(trace_format fmt, const trace_read_options& options = {});

/// Path of the bundled Mooncake conversation trace in the source tree:
/// $KVTIER_DATA_DIR/mooncake_conversation_trace.jsonl when KVTIER_DATA_DIR is
/// set and not empty, else <source dir>/sim/traces/mooncake_conversation_trace.jsonl.
std::string default_trace_path();

/// Folder of the bundled traces ($KVTIER_DATA_DIR, else <source dir>/sim/traces).
std::string bundled_trace_dir();

} // namespace kvtier::sim
