#pragma once
// page_file over a pool of threads doing preadv/pwritev: the fallback where
// io_uring is missing or forbidden. One thread per lane up to a cap, so
// queue depth N keeps N requests in the kernel at once, as io_uring does.

#include "io/page_file.hpp"

#include "runtime/worker_queue.hpp"

#include <memory>

namespace kvtier::io {

class threaded_page_file final : public page_file {
public:
  /// More threads than this cost more in switching than they gain on one device.
  static constexpr uint32_t max_threads = 64;

  threaded_page_file(int fd, uint32_t queue_depth, std::string why);
  ~threaded_page_file() override;

  std::string describe() const override { return description_; }
  void set_callback(raw_callback cb) override { callback_ = std::move(cb); }
  void submit(std::span<const raw_io> batch) override;

private:
  int64_t run(const raw_io& r) const; // bytes moved or -errno

  int fd_; // Constant after construction.
  std::string description_;
  raw_callback callback_; // set before the first submit
  // Last: its threads start once the members above exist; destruction drains it.
  worker_queue<raw_io> requests_;
};

} // namespace kvtier::io
