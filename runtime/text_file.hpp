#pragma once
// Checked whole-file output. A report, profile or CSV that cannot be written
// must fail the command that made it, never vanish: write_text_file returns
// an error unless every byte reached the file and close() succeeded (a full
// disk or /dev/full shows up as ENOSPC here, not at some later flush).
//
// The file is created (mode 0644 before umask) or truncated in place, not
// renamed over, so paths such as /dev/stdout keep working.

#include <caf/error.hpp>

#include <string>
#include <string_view>

namespace kvtier {

/// Writes `text` to `path`. Errors: errc::io_failure "cannot write PATH: REASON".
[[nodiscard]] caf::error write_text_file(const std::string& path, std::string_view text);

} // namespace kvtier
