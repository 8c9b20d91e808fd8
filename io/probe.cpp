#include "io/probe.hpp"

#include "io/os_error.hpp"
#include "io/slot_format.hpp"
#include "io/uring_page_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace kvtier::io {

std::string probe_result::message() const {
  return "NVMe tier: " + std::string(engine == engine_choice::uring ? "io_uring" : "pread/pwrite thread pool") + " (" +
      engine_why + "); " + (direct_io ? "O_DIRECT" : "buffered I/O") + " (" + direct_why + ")";
}

probe_result probe_engine(engine_choice wanted) {
  probe_result r;
  if (wanted == engine_choice::threads) {
    r.engine = engine_choice::threads;
    r.engine_why = "engine = \"threads\" in the configuration";
    return r;
  }
  std::string why_not = uring_unavailable_reason();
  if (why_not.empty()) {
    r.engine = engine_choice::uring;
    r.engine_why =
        wanted == engine_choice::uring ? "engine = \"io_uring\" in the configuration" : "probed: io_uring works here";
  } else {
    r.engine = engine_choice::threads;
    r.engine_why = "io_uring unavailable: " + why_not;
  }
  return r;
}

int open_slot_file(const std::string& file, bool want_direct, probe_result& result) {
  constexpr int flags = O_RDWR | O_CREAT | O_CLOEXEC;
  if (!want_direct) {
    result.direct_io = false;
    result.direct_why = "direct_io = false in the configuration";
    int fd = ::open(file.c_str(), flags, 0644);
    return fd < 0 ? -errno : fd;
  }
  int fd = ::open(file.c_str(), flags | O_DIRECT, 0644);
  int err = fd < 0 ? errno : 0;
  if (fd >= 0) {
    // Some filesystems accept the flag and fail the first read: try one.
    void* mem = nullptr;
    if (posix_memalign(&mem, sector_bytes, sector_bytes) != 0)
      return -ENOMEM;
    std::unique_ptr<void, decltype(&std::free)> buf{mem, &std::free};
    if (::pread(fd, buf.get(), sector_bytes, 0) < 0) {
      err = errno;
      ::close(fd);
      fd = -1;
    }
  }
  if (fd >= 0) {
    result.direct_io = true;
    result.direct_why = "the filesystem accepts it";
    return fd;
  }
  if (err != EINVAL && err != EOPNOTSUPP)
    return -err;
  result.direct_io = false;
  result.direct_why = "O_DIRECT refused by the filesystem of " + file + " (" + errno_name(err) +
      "; tmpfs and some overlay mounts do this): the page cache sits between DRAM and the device";
  fd = ::open(file.c_str(), flags, 0644);
  return fd < 0 ? -errno : fd;
}

} // namespace kvtier::io
