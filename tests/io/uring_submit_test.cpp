// io_uring: a request the kernel refuses (a registered-buffer index out of
// range) completes with its error, and the requests after it in the same
// batch complete with their bytes, without another submit. Kernels that check
// the index when the batch is submitted stop taking SQEs there; those that
// check it when the read is issued (6.18 here) take them all: either way
// submit_locked leaves no SQE behind, and this test holds on both.

#include "io/uring_page_file.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <mutex>
#include <unistd.h>

namespace kvtier::io {
namespace {

constexpr uint64_t page = 4096;
constexpr uint64_t pages = 4;

TEST(uring_submit, a_refused_request_completes_with_its_error_and_the_rest_of_its_batch_with_their_bytes) {
  if (auto why = uring_unavailable_reason(); !why.empty())
    GTEST_SKIP() << why;
  char path[] = "/tmp/kvtier-uring-submit-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  std::vector<std::byte> pattern(pages * page);
  for (size_t i = 0; i < pattern.size(); ++i)
    pattern[i] = static_cast<std::byte>((i * 131 + 7) & 0xff);
  ASSERT_EQ(::pwrite(fd, pattern.data(), pattern.size(), 0), static_cast<ssize_t>(pattern.size()));

  auto* payload = static_cast<std::byte*>(std::aligned_alloc(page, pages * page));
  auto* headers = static_cast<std::byte*>(std::aligned_alloc(page, page));
  std::memset(payload, 0, pages * page);
  uring_params p;
  p.fd = fd;
  p.queue_depth = 4;
  p.buffers = {payload, pages * page, pages * page, headers, page};
  auto file = uring_page_file::open(p);
  ASSERT_TRUE(file);
  if ((*file)->describe().find("registered buffers") == std::string::npos)
    GTEST_SKIP() << "no registered buffers here: " << (*file)->describe();

  std::mutex m;
  std::condition_variable cv;
  std::map<uint64_t, int64_t> results;
  (*file)->set_callback([&](uint64_t id, int64_t result) {
    std::lock_guard lock{m};
    results[id] = result;
    cv.notify_all();
  });
  // Request 1 reads into memory past the registered region (one buffer):
  // its buffer index is out of range and the kernel refuses it.
  // Requests 2 and 3, after it in the batch, are good reads.
  std::vector<raw_io> batch{
      {io_dir::read, 1, 0, 0, 0, nullptr, payload + 16 * pages * page, page},
      {io_dir::read, 2, 1, 0, 0, nullptr, payload, page},
      {io_dir::read, 3, 2, 0, 2 * page, nullptr, payload + 2 * page, 2 * page},
  };
  (*file)->submit(batch);
  {
    std::unique_lock lock{m};
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return results.size() == 3; });
  }
  std::map<uint64_t, int64_t> seen;
  {
    std::lock_guard lock{m};
    seen = results;
  }
  ASSERT_EQ(seen.size(), 3u) << "requests after the refused one never completed";
  EXPECT_LT(seen[1], 0);
  EXPECT_EQ(seen[2], static_cast<int64_t>(page));
  EXPECT_EQ(seen[3], static_cast<int64_t>(2 * page));
  EXPECT_EQ(std::memcmp(payload, pattern.data(), page), 0);
  EXPECT_EQ(std::memcmp(payload + 2 * page, pattern.data() + 2 * page, 2 * page), 0);
  file->reset();
  std::free(payload);
  std::free(headers);
  ::close(fd);
}

} // namespace
} // namespace kvtier::io
