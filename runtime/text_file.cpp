#include "runtime/text_file.hpp"

#include "runtime/error.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace kvtier {
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
