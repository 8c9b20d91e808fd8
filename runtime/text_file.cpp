#include "runtime/text_file.hpp"

#include "runtime/units.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace kvtier {

caf::expected<std::string> read_text_file(const std::string& path, std::string_view what, errc code,
                                          uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return make_error(code, fmt::format("{}: cannot open {} ({})", path, what, std::strerror(errno)));
  struct close_on_exit {
    int fd;
    ~close_on_exit() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return make_error(code, fmt::format("{}: cannot open {} ({})", path, what, std::strerror(errno)));
  if (S_ISDIR(st.st_mode))
    return make_error(code, fmt::format("{}: {} is a directory, not a file", path, what));
  if (!S_ISREG(st.st_mode))
    return make_error(code, fmt::format("{}: {} is not a regular file", path, what));
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return make_error(code,
                      fmt::format("{}: {} is {}; expected at most {}", path, what,
                                  format_bytes(static_cast<uint64_t>(st.st_size)), format_bytes(max_bytes)));
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return make_error(code, fmt::format("{}: cannot read {} ({})", path, what, std::strerror(errno)));
    if (n == 0)
      break; // shrank while reading: take what is there
    done += static_cast<size_t>(n);
  }
  text.resize(done);
  return text;
}

namespace {

caf::error cannot_write(const std::string& path, int err) {
  return make_error(errc::io_failure, fmt::format("cannot write {}: {}", path, std::strerror(err)));
}

} // namespace

caf::error write_text_file(const std::string& path, std::string_view text) {
  if (path.empty())
    return make_error(errc::invalid_argument, "cannot write a file with an empty name");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return cannot_write(path, errno);
  while (!text.empty()) {
    ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO; // a zero-byte write of a non-empty buffer makes no progress
      ::close(fd);
      return cannot_write(path, err);
    }
    text.remove_prefix(static_cast<size_t>(n));
  }
  // NFS and some FUSE filesystems report write-back errors only here.
  if (::close(fd) != 0)
    return cannot_write(path, errno);
  return {};
}

} // namespace kvtier
