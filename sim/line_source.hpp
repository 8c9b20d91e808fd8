#pragma once
// Internal to the trace readers: a trace's lines, one at a time, either from
// text in memory (line_cursor) or from a file read in bounded chunks
// (file_lines).
//
// Invariants:
//  (1) a reader that stops early (max_requests) has read at most one chunk
//      past the last line it used: a 1 GiB trace with max_requests = 50 reads
//      kilobytes, not the file;
//  (2) file_lines never holds more than max_line_bytes + one chunk, whatever
//      the input (/dev/zero, a binary file, a pipe that never ends a line);
//  (3) a line a reader got stays valid until its next call to next();
//  (4) files that are not regular files or pipes (directories, devices,
//      sockets) are refused when opened, with the path and what they are.

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kvtier::sim::detail {

/// The longest line accepted. A Mooncake row of a 1M-token request with
/// 16-token blocks is about 1.3 MB; 16 MiB leaves room and still bounds memory.
inline constexpr size_t max_line_bytes = size_t{16} << 20;

class line_source {
public:
  line_source() = default;
  line_source(const line_source&) = delete;
  line_source& operator=(const line_source&) = delete;
  virtual ~line_source() = default;

  /// The next line without its terminator (LF or CRLF; the last line may lack
  /// one; a UTF-8 byte-order mark is not part of line 1), or nullopt at the
  /// end, or when reading failed (then error() says why).
  std::optional<std::string_view> next();
  /// Makes next() return the line it returned last once more, with the same
  /// number (format detection peeks at the first line).
  /// REQUIRES: next() returned a line since the last unread().
  void unread();
  /// The 1-based number of the line next() returned last.
  uint64_t number() const { return number_; }
  /// Why the lines ended early, located as "file:line: ..."; empty at a clean end.
  const caf::error& error() const { return error_; }

protected:
  /// The next raw line (CR and BOM not yet stripped), or nullopt at the end
  /// or on failure (setting error_).
  virtual std::optional<std::string_view> read_line() = 0;
  caf::error error_;

private:
  std::optional<std::string_view> last_;
  bool replay_ = false;
  uint64_t number_ = 0;
};

/// Lines of text already in memory.
class line_cursor final : public line_source {
public:
  explicit line_cursor(std::string_view text) : rest_(text) {}

protected:
  std::optional<std::string_view> read_line() override;

private:
  std::string_view rest_;
};

/// Lines of a file, read as they are needed.
class file_lines final : public line_source {
public:
  /// Opens `path`; check error() before reading: errc::io_failure
  /// "PATH: cannot open trace: WHY" when it cannot be opened or is not a
  /// regular file or a pipe.
  explicit file_lines(std::string path);
  ~file_lines() override;

protected:
  std::optional<std::string_view> read_line() override;

private:
  /// Reads more bytes after end_; false at the end of the file or on error.
  bool fill();

  std::string path_;
  int fd_ = -1;
  std::string buffer_;
  size_t begin_ = 0;   // first byte not yet returned
  size_t scanned_ = 0; // bytes from begin_ known to hold no newline
  size_t end_ = 0;     // end of the bytes read
  bool eof_ = false;
};

} // namespace kvtier::sim::detail
