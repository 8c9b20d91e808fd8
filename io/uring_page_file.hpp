#pragma once
// page_file over io_uring: fixed file, registered buffers (the DRAM pool's
// region and the header arena), batched submission, optional SQPOLL, and one
// reaper thread that drains the completion queue.
//
// A payload-only request (every read) is one READ_FIXED SQE (READ without
// registered buffers). A request with its header: adjacent on disk, one
// READV/WRITEV SQE of two iovecs; apart (the split layout), two SQEs in one
// batch, fixed-buffer ones when registered.
//
// Requests submitted from inside a completion callback (retries, and callers
// that chain the next request) are prepared at once but submitted together
// after the reaper's batch of completions: one io_uring_enter per batch
// (another only when the kernel took fewer SQEs than were prepared).

#include "io/page_file.hpp"
#include "runtime/mutex.hpp"

#include <caf/expected.hpp>

#include <liburing.h>

#include <atomic>
#include <thread>
#include <vector>

namespace kvtier::io {

struct uring_params {
  int fd = -1;
  uint32_t queue_depth = 32;
  bool sqpoll = false;
  bool register_buffers = true;
  io_buffers buffers;
};

/// Empty when io_uring works here for file reads and writes; else why not.
std::string uring_unavailable_reason();

class uring_page_file final : public page_file {
public:
  static caf::expected<std::unique_ptr<uring_page_file>> open(const uring_params& p);
  ~uring_page_file() override;

  std::string describe() const override { return description_; }
  void set_callback(raw_callback cb) override { callback_ = std::move(cb); }
  void submit(std::span<const raw_io> batch) override;

private:
  uring_page_file() = default;
  void reap();
  void submit_locked() REQUIRES(sq_mutex_);

  // A lane's fields are written by submit() and then published by the release
  // store of parts_left; the reaper's acquire load of it sees them. (The ring
  // orders them too, but through the kernel, which no race detector sees.)
  struct lane {
    uint64_t id = 0;
    std::atomic<int> parts_left{0};
    int64_t total = 0;
    int64_t error = 0;
    iovec iov[2];
  };

  io_uring ring_{};
  bool ring_ready_ = false;
  int fd_ = -1; // Constant after open.
  bool fixed_file_ = false;
  bool fixed_buffers_ = false;
  io_buffers buffers_;
  unsigned header_buffer_index_ = 0;
  std::string description_;
  raw_callback callback_;
  std::unique_ptr<lane[]> lanes_; // lane i: written by submit, read by the reaper after its CQE
  uint32_t lane_count_ = 0;
  kvtier::mutex sq_mutex_; // guards the submission queue (the ring's SQ side; the reaper alone reads the CQ)
  bool reaper_pending_ GUARDED_BY(sq_mutex_) = false; // SQEs the reaper prepared, to submit after its batch
  std::thread reaper_;
  std::thread::id reaper_id_; // Constant after open.
};

} // namespace kvtier::io
