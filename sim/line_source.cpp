#include "sim/line_source.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvtier::sim::detail {
namespace {

// Bytes asked of read() at a time: large enough that syscalls do not show in
// a profile, small enough that stopping early reads next to nothing.
constexpr size_t chunk_bytes = size_t{64} << 10;

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

// ---------------------------------------------------------------------------
// line_source

std::optional<std::string_view> line_source::next() {
  if (replay_) {
    replay_ = false;
    return last_;
  }
  last_ = read_line();
  if (!last_)
    return std::nullopt;
  ++number_;
  if (number_ == 1 && last_->starts_with("\xEF\xBB\xBF"))
    last_->remove_prefix(3);
  if (last_->ends_with('\r'))
    last_->remove_suffix(1);
  return last_;
}

void line_source::unread() {
  replay_ = last_.has_value();
}

// ---------------------------------------------------------------------------
// line_cursor

std::optional<std::string_view> line_cursor::read_line() {
  if (rest_.empty())
    return std::nullopt;
  auto end = rest_.find('\n');
  std::string_view line = rest_.substr(0, end);
  rest_.remove_prefix(end == std::string_view::npos ? rest_.size() : end + 1);
  return line;
}

// ---------------------------------------------------------------------------
// file_lines

file_lines::file_lines(std::string path) : path_(std::move(path)) {
  auto refuse = [&](const std::string& why) {
    error_ = make_error(errc::io_failure, fmt::format("{}: cannot open trace: {}", path_, why));
  };
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) {
    refuse(std::strerror(errno));
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    refuse(std::strerror(errno));
  } else if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    refuse(fmt::format("it is {} (traces are read from regular files or pipes)", kind_of(st.st_mode)));
  } else {
    buffer_.resize(chunk_bytes);
    return;
  }
  ::close(fd_);
  fd_ = -1;
}

file_lines::~file_lines() {
  if (fd_ >= 0)
    ::close(fd_);
}

bool file_lines::fill() {
  if (eof_ || fd_ < 0)
    return false;
  if (begin_ > 0) { // keep the partial line, drop what was returned
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (buffer_.size() - end_ < chunk_bytes)
    buffer_.resize(end_ + chunk_bytes);
  for (;;) {
    ssize_t n = ::read(fd_, buffer_.data() + end_, chunk_bytes);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error_ = make_error(errc::io_failure,
                          fmt::format("{}:{}: cannot read trace: {}", path_, number() + 1, std::strerror(errno)));
      return false;
    }
    if (n == 0) {
      eof_ = true;
      return false;
    }
    end_ += static_cast<size_t>(n);
    return true;
  }
}

std::optional<std::string_view> file_lines::read_line() {
  if (fd_ < 0)
    return std::nullopt;
  for (;;) {
    const char* base = buffer_.data() + begin_;
    if (auto* nl = static_cast<const char*>(std::memchr(base + scanned_, '\n', end_ - begin_ - scanned_))) {
      std::string_view line(base, static_cast<size_t>(nl - base));
      begin_ += line.size() + 1;
      scanned_ = 0;
      return line;
    }
    scanned_ = end_ - begin_;
    if (scanned_ > max_line_bytes) {
      error_ = make_error(errc::invalid_trace,
                          fmt::format("{}:{}: line longer than {} MiB; is this a trace file?", path_, number() + 1,
                                      max_line_bytes >> 20));
      return std::nullopt;
    }
    if (!fill()) {
      if (!error_ && begin_ < end_) { // the last line lacks a newline
        std::string_view line(buffer_.data() + begin_, end_ - begin_);
        begin_ = end_;
        scanned_ = 0;
        return line;
      }
      return std::nullopt;
    }
  }
}

} // namespace kvtier::sim::detail
