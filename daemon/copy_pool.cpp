#include "daemon/copy_pool.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <chrono>
#include <cstring>

namespace kvtier::daemon {

struct copy_pool::threads {
  explicit threads(unsigned n) : pool(n) {}
  boost::asio::thread_pool pool;
};

copy_pool::copy_pool(unsigned n, std::uint64_t block_bytes)
    : threads_(std::make_unique<threads>(n)), block_bytes_(block_bytes) {
}

copy_pool::~copy_pool() {
  threads_->pool.join();
}

void copy_pool::run(std::vector<block_copy> copies, std::function<void()> done) {
  boost::asio::post(threads_->pool, [this, copies = std::move(copies), done = std::move(done)] {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& c : copies)
      std::memcpy(c.to, c.from, block_bytes_);
    copy_ns_.fetch_add(
        static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()),
        std::memory_order_relaxed);
    blocks_.fetch_add(copies.size(), std::memory_order_relaxed);
    done();
  });
}

} // namespace kvtier::daemon
