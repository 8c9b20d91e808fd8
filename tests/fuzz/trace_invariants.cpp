#include "tests/fuzz/trace_invariants.hpp"

#include "tests/fuzz/fuzz_require.hpp"

#include "runtime/error.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier::fuzz {
namespace {

void check_accepted(const sim::trace& t, const sim::trace_read_options& options) {
  const auto& requests = t.requests;
  double earliest = requests.empty() ? 0.0 : requests.front().arrival_s;
  for (size_t i = 0; i < requests.size(); ++i) {
    const auto& r = requests[i];
    fuzz_require(r.id == i, "request {} has id {}", i, r.id);
    fuzz_require(std::isfinite(r.arrival_s) && r.arrival_s >= 0, "request {} arrives at {} s", i, r.arrival_s);
    earliest = std::min(earliest, r.arrival_s);
    if (!r.block_ids.empty()) {
      fuzz_require(r.block_tokens > 0, "request {} has block ids of 0 tokens", i);
      uint64_t room = (uint64_t{r.input_tokens} + r.block_tokens - 1) / r.block_tokens;
      fuzz_require(r.block_ids.size() <= room, "request {} has {} block ids for {} tokens", i, r.block_ids.size(),
                   r.input_tokens);
    }
  }
  fuzz_require(earliest == 0.0, "the earliest arrival is {} s, not 0", earliest);
  fuzz_require(t.stats.requests == requests.size(), "stats count {} requests of {}", t.stats.requests, requests.size());
  if (options.max_requests > 0)
    fuzz_require(requests.size() <= options.max_requests, "{} requests with max_requests {}", requests.size(),
                 options.max_requests);
  auto reuse = sim::ideal_prefix_reuse(t);
  fuzz_require(reuse.hit_tokens <= reuse.input_tokens, "prefix reuse hits {} of {} tokens", reuse.hit_tokens,
               reuse.input_tokens);
  fuzz_require(reuse.hit_blocks <= reuse.blocks, "prefix reuse hits {} of {} blocks", reuse.hit_blocks, reuse.blocks);
}

caf::expected<sim::trace> read(std::string_view text, const std::string& name, sim::trace_format format,
                               const sim::trace_read_options& options) {
  auto t = sim::parse_trace(text, name, format, options);
  if (!t) {
    auto message = describe(t.error());
    fuzz_require(message.find(name) != std::string::npos, "trace error does not name the file: {}", message);
    return t;
  }
  check_accepted(*t, options);
  return t;
}

} // namespace

void check_trace_reader(std::string_view text, const std::string& name, sim::trace_format format) {
  sim::trace_read_options strict;
  auto full = read(text, name, format, strict);

  sim::trace_read_options skipping;
  skipping.skip_bad = true;
  auto skipped = read(text, name, format, skipping);
  if (full) {
    fuzz_require(static_cast<bool>(skipped), "skip_bad rejects a trace strict reading accepts");
    fuzz_require(skipped->skipped_rows == 0, "skip_bad skipped {} rows strict reading accepted", skipped->skipped_rows);
    fuzz_require(skipped->requests.size() == full->requests.size(), "skip_bad read {} requests, strict {}",
                 skipped->requests.size(), full->requests.size());
  }

  sim::trace_read_options first_only;
  first_only.max_requests = 1;
  auto first = read(text, name, format, first_only);
  if (full && !full->requests.empty()) {
    fuzz_require(static_cast<bool>(first) && first->requests.size() == 1, "max_requests 1 did not read one request");
    const auto& a = first->requests.front();
    const auto& b = full->requests.front();
    fuzz_require(a.input_tokens == b.input_tokens && a.output_tokens == b.output_tokens && a.block_ids == b.block_ids,
                 "max_requests 1 read another first request");
  }
}

} // namespace kvtier::fuzz
