#include "io/threaded_page_file.hpp"

#include "runtime/check.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace kvtier::io {

threaded_page_file::threaded_page_file(int fd, uint32_t queue_depth, std::string why)
    : fd_(fd),
      description_("pread/pwrite thread pool (" + std::to_string(std::clamp<uint32_t>(queue_depth, 1, max_threads)) +
                   " threads" + (why.empty() ? "" : "; " + why) + ")"),
      requests_(std::clamp<uint32_t>(queue_depth, 1, max_threads), [this](raw_io& r) { callback_(r.id, run(r)); }) {
}

threaded_page_file::~threaded_page_file() = default;

void threaded_page_file::submit(std::span<const raw_io> batch) {
  bool queued = requests_.push_all(batch.begin(), batch.end());
  KVTIER_CHECK(queued, "submit to an engine that is being destroyed");
}

int64_t threaded_page_file::run(const raw_io& r) const {
  auto call = [&](iovec* iov, int n, uint64_t offset) -> int64_t {
    ssize_t got;
    do {
      got = r.dir == io_dir::write ? pwritev(fd_, iov, n, static_cast<off_t>(offset))
                                   : preadv(fd_, iov, n, static_cast<off_t>(offset));
    } while (got < 0 && errno == EINTR);
    return got < 0 ? -int64_t{errno} : int64_t{got};
  };
  iovec iov[2];
  make_iovecs(r, iov);
  if (!r.header)
    return call(&iov[1], 1, r.payload_offset);
  if (adjacent(r))
    return call(iov, 2, r.offset);
  int64_t header = call(&iov[0], 1, r.offset);
  if (header != static_cast<int64_t>(iov[0].iov_len))
    return header; // an error, or short: the caller retries the whole slot
  int64_t payload = call(&iov[1], 1, r.payload_offset);
  return payload < 0 ? payload : header + payload;
}

} // namespace kvtier::io
