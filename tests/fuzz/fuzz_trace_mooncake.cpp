// Fuzz target: the Mooncake JSONL trace reader, kvtier::sim::parse_trace(text, name, mooncake).
// Invariants: tests/fuzz/trace_invariants.hpp.

#include "tests/fuzz/fuzz_require.hpp"
#include "tests/fuzz/trace_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string name = "fuzz-trace.jsonl";
  kvtier::fuzz::check_trace_reader(kvtier::fuzz::as_text(data, size), name, kvtier::sim::trace_format::mooncake);
  return 0;
}
