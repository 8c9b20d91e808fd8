#pragma once
// fuzz_require: an invariant a fuzz target checks on what a parser returned.
// A violation prints what was wrong and aborts, which libFuzzer (and the
// corpus replay) reports as a crash with the input that caused it.

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace kvtier::fuzz {

template <class... Args>
void fuzz_require(bool holds, fmt::format_string<Args...> what, Args&&... args) {
  if (holds) [[likely]]
    return;
  std::fprintf(stderr, "fuzz: invariant violated: %s\n", fmt::format(what, std::forward<Args>(args)...).c_str());
  std::abort();
}

/// The fuzz input as text (parsers take std::string_view).
inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

} // namespace kvtier::fuzz
