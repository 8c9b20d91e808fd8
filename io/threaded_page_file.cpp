#include "io/threaded_page_file.hpp"

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace kvtier::io {

threaded_page_file::threaded_page_file(int fd, uint32_t queue_depth, std::string why) : fd_(fd) {
  uint32_t n = std::clamp<uint32_t>(queue_depth, 1, max_threads);
  description_ = "pread/pwrite thread pool (" + std::to_string(n) + " threads" + (why.empty() ? "" : "; " + why) + ")";
  for (uint32_t i = 0; i < n; ++i)
    threads_.emplace_back([this] { work(); });
}

threaded_page_file::~threaded_page_file() {
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_)
    t.join();
}

void threaded_page_file::submit(std::span<const raw_io> batch) {
  {
    std::lock_guard lock{mutex_};
    queue_.insert(queue_.end(), batch.begin(), batch.end());
  }
  if (batch.size() == 1)
    ready_.notify_one();
  else
    ready_.notify_all();
}

void threaded_page_file::work() {
  for (;;) {
    raw_io r;
    {
      std::unique_lock lock{mutex_};
      ready_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return; // stopping, and nothing left to do
      r = queue_.front();
      queue_.pop_front();
    }
    iovec iov[2];
    make_iovecs(r, iov);
    ssize_t n;
    do {
      n = r.dir == io_dir::write ? pwritev(fd_, iov, 2, static_cast<off_t>(r.offset))
                                 : preadv(fd_, iov, 2, static_cast<off_t>(r.offset));
    } while (n < 0 && errno == EINTR);
    callback_(r.id, n < 0 ? -int64_t{errno} : int64_t{n});
  }
}

} // namespace kvtier::io
