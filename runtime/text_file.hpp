#pragma once
// Reading a whole text input (a config, a hardware profile) safely.
//
// Only regular files are read: a directory, a FIFO or a device such as
// /dev/zero is refused with a message instead of yielding defaults or
// growing without bound, and a file larger than `max_bytes` is refused
// before it is read.

#include "runtime/error.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace kvtier {

/// Inputs kvtier reads whole are small; 16 MiB is far beyond any real config.
inline constexpr uint64_t max_text_file_bytes = 16ull << 20;

/// The file's bytes. Errors carry `code` and say "PATH: cannot open WHAT (reason)",
/// "PATH: WHAT is a directory, not a file", "PATH: WHAT is not a regular file"
/// or "PATH: WHAT is N bytes; expected at most M".
caf::expected<std::string> read_text_file(const std::string& path, std::string_view what,
                                          errc code = errc::invalid_config, uint64_t max_bytes = max_text_file_bytes);

} // namespace kvtier
