#pragma once
// Whole text files in and out, checked.
//
// Reading: only regular files are read: a directory, a FIFO or a device such
// as /dev/zero is refused with a message instead of yielding defaults or
// growing without bound, and a file larger than `max_bytes` is refused
// before it is read.
//
// Writing: a report, profile or CSV that cannot be written must fail the
// command that made it, never vanish: write_text_file returns an error unless
// every byte reached the file and close() succeeded (a full disk or /dev/full
// shows up as ENOSPC here, not at some later flush). The file is created
// (mode 0644 before umask) or truncated in place, not renamed over, so paths
// such as /dev/stdout keep working.

#include "runtime/error.hpp"

#include <caf/error.hpp>
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

/// Writes `text` to `path`. Errors: errc::io_failure "cannot write PATH: REASON".
[[nodiscard]] caf::error write_text_file(const std::string& path, std::string_view text);

} // namespace kvtier
