#include "io/os_error.hpp"

#include <cerrno>
#include <cstring>

namespace kvtier::io {

std::string errno_name(int err) {
  switch (err) {
    case EIO:
      return "EIO";
    case ENOSPC:
      return "ENOSPC";
    case EDQUOT:
      return "EDQUOT";
    case EINVAL:
      return "EINVAL";
    case EAGAIN:
      return "EAGAIN";
    case EINTR:
      return "EINTR";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case ENOENT:
      return "ENOENT";
    case ENOMEM:
      return "ENOMEM";
    case ENOSYS:
      return "ENOSYS";
    case EOPNOTSUPP:
      return "EOPNOTSUPP";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case ECANCELED:
      return "ECANCELED";
    case EBADF:
      return "EBADF";
    case EFAULT:
      return "EFAULT";
    case EROFS:
      return "EROFS";
    default:
      return "errno " + std::to_string(err);
  }
}

caf::error os_error(int err, const std::string& what) {
  auto code = (err == ENOSPC || err == EDQUOT) ? errc::no_capacity : errc::io_failure;
  return make_error(code, what + ": " + std::strerror(err) + " (" + errno_name(err) + ")");
}

} // namespace kvtier::io
