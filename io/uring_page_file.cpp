#include "io/uring_page_file.hpp"

#include "io/os_error.hpp"
#include "io/slot_format.hpp"
#include "runtime/check.hpp"

#include <cerrno>
#include <cstring>

namespace kvtier::io {
namespace {

// user_data of the NOP that tells the reaper to stop; lanes use (lane << 1) | part.
constexpr uint64_t stop_token = ~uint64_t{0};
// SQPOLL's kernel thread sleeps after this long without submissions; a short
// idle keeps an idle store from holding a core, a long one saves wake-ups.
constexpr unsigned sqpoll_idle_ms = 50;

} // namespace

std::string uring_unavailable_reason() {
  io_uring ring{};
  int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0)
    return "io_uring_setup failed: " + std::string(std::strerror(-rc)) + " (" + errno_name(-rc) +
        (rc == -EPERM ? "; kernel.io_uring_disabled or a seccomp filter forbids it)" : ")");
  std::string reason;
  io_uring_probe* probe = io_uring_get_probe_ring(&ring);
  if (!probe) {
    reason = "io_uring has no opcode probe (kernel older than 5.6)";
  } else {
    for (int op : {IORING_OP_READV, IORING_OP_WRITEV, IORING_OP_READ_FIXED, IORING_OP_WRITE_FIXED, IORING_OP_READ,
                   IORING_OP_WRITE, IORING_OP_NOP})
      if (!io_uring_opcode_supported(probe, op))
        reason = "io_uring lacks opcode " + std::to_string(op);
    io_uring_free_probe(probe);
  }
  if (reason.empty()) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    io_uring_prep_nop(sqe);
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_submit_and_wait(&ring, 1);
    if (rc < 0 || io_uring_peek_cqe(&ring, &cqe) < 0 || cqe->res < 0)
      reason = "io_uring accepted no request (a NOP failed: " + std::string(std::strerror(rc < 0 ? -rc : EIO)) + ")";
    else
      io_uring_cqe_seen(&ring, cqe);
  }
  io_uring_queue_exit(&ring);
  return reason;
}

caf::expected<std::unique_ptr<uring_page_file>> uring_page_file::open(const uring_params& p) {
  KVTIER_CHECK(p.queue_depth > 0, "queue depth must be positive");
  std::unique_ptr<uring_page_file> f{new uring_page_file};
  f->fd_ = p.fd;
  f->buffers_ = p.buffers;
  f->lanes_ = std::make_unique<lane[]>(p.queue_depth);
  f->lane_count_ = p.queue_depth;
  // Two SQEs per request with registered buffers; the CQ is twice the SQ.
  unsigned entries = 2 * p.queue_depth;
  std::string notes;
  int rc = -EINVAL;
  if (p.sqpoll) {
    io_uring_params params{};
    params.flags = IORING_SETUP_SQPOLL;
    params.sq_thread_idle = sqpoll_idle_ms;
    rc = io_uring_queue_init_params(entries, &f->ring_, &params);
    if (rc < 0)
      notes += ", SQPOLL refused (" + errno_name(-rc) + "; needs root or CAP_SYS_NICE), interrupt-driven instead";
    else
      notes += ", SQPOLL";
  }
  if (rc < 0)
    rc = io_uring_queue_init(entries, &f->ring_, 0);
  if (rc < 0)
    return os_error(-rc, "io_uring_queue_init(" + std::to_string(entries) + ")");
  f->ring_ready_ = true;

  rc = io_uring_register_files(&f->ring_, &p.fd, 1);
  f->fixed_file_ = rc == 0;
  if (rc < 0)
    notes += ", fixed file refused (" + errno_name(-rc) + ")";

  if (p.register_buffers && p.buffers.payload_base) {
    std::vector<iovec> iov;
    KVTIER_CHECK(p.buffers.payload_chunk > 0 && p.buffers.payload_chunk <= max_block_bytes,
                 "registration chunk must be in (0, 1 GiB]");
    for (uint64_t off = 0; off < p.buffers.payload_bytes; off += p.buffers.payload_chunk)
      iov.push_back({p.buffers.payload_base + off, std::min(p.buffers.payload_chunk, p.buffers.payload_bytes - off)});
    f->header_buffer_index_ = static_cast<unsigned>(iov.size());
    iov.push_back({p.buffers.header_base, p.buffers.header_bytes});
    rc = io_uring_register_buffers(&f->ring_, iov.data(), static_cast<unsigned>(iov.size()));
    f->fixed_buffers_ = rc == 0;
    if (rc < 0)
      notes += ", buffer registration refused (" + errno_name(-rc) + (rc == -ENOMEM ? "; raise RLIMIT_MEMLOCK" : "") +
          "), vectored I/O instead";
    else
      notes += ", " + std::to_string(iov.size()) + " registered buffers";
  }
  if (f->fixed_file_)
    notes += ", fixed file";
  f->description_ = "io_uring (queue depth " + std::to_string(p.queue_depth) + notes + ")";
  f->reaper_ = std::thread([raw = f.get()] { raw->reap(); });
  f->reaper_id_ = f->reaper_.get_id();
  return f;
}

uring_page_file::~uring_page_file() {
  if (reaper_.joinable()) {
    {
      mutex_lock lock{sq_mutex_};
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      KVTIER_CHECK(sqe != nullptr, "no SQE left for the stop request");
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, stop_token);
      while (io_uring_submit(&ring_) == -EINTR) {
      }
    }
    reaper_.join();
  }
  if (ring_ready_)
    io_uring_queue_exit(&ring_);
}

void uring_page_file::submit(std::span<const raw_io> batch) {
  mutex_lock lock{sq_mutex_};
  const int fd = fixed_file_ ? 0 : fd_;
  auto prepare = [&](io_uring_sqe* sqe, uint64_t data) {
    if (fixed_file_)
      sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data64(sqe, data);
  };
  for (const raw_io& r : batch) {
    KVTIER_CHECK(r.lane < lane_count_, "lane out of range");
    lane& l = lanes_[r.lane];
    KVTIER_CHECK(l.parts_left.load(std::memory_order_acquire) == 0, "two requests on one lane");
    l.id = r.id;
    l.total = 0;
    l.error = 0;
    if (!r.header) {
      io_uring_sqe* s = io_uring_get_sqe(&ring_);
      KVTIER_CHECK(s, "submission queue full");
      KVTIER_CHECK(r.dir == io_dir::read, "a write carries its header");
      const auto n = static_cast<unsigned>(r.payload_bytes);
      if (fixed_buffers_)
        io_uring_prep_read_fixed(s, fd, r.payload, n, r.payload_offset,
                                 static_cast<int>((r.payload - buffers_.payload_base) / buffers_.payload_chunk));
      else
        io_uring_prep_read(s, fd, r.payload, n, r.payload_offset);
      l.parts_left.store(1, std::memory_order_release);
      prepare(s, uint64_t{r.lane} << 1);
    } else if (adjacent(r)) {
      // One request for both: registered buffers would need two (no vectored fixed opcode before 6.15).
      make_iovecs(r, l.iov);
      l.parts_left.store(1, std::memory_order_release);
      io_uring_sqe* s = io_uring_get_sqe(&ring_);
      KVTIER_CHECK(s, "submission queue full");
      if (r.dir == io_dir::write)
        io_uring_prep_writev(s, fd, l.iov, 2, r.offset);
      else
        io_uring_prep_readv(s, fd, l.iov, 2, r.offset);
      prepare(s, uint64_t{r.lane} << 1);
    } else if (fixed_buffers_) {
      l.parts_left.store(2, std::memory_order_release);
      auto chunk = static_cast<int>((r.payload - buffers_.payload_base) / buffers_.payload_chunk);
      io_uring_sqe* h = io_uring_get_sqe(&ring_);
      io_uring_sqe* b = io_uring_get_sqe(&ring_);
      KVTIER_CHECK(h && b, "submission queue full");
      if (r.dir == io_dir::write) {
        io_uring_prep_write_fixed(h, fd, r.header, sector_bytes, r.offset, static_cast<int>(header_buffer_index_));
        io_uring_prep_write_fixed(b, fd, r.payload, static_cast<unsigned>(r.payload_bytes), r.payload_offset, chunk);
      } else {
        io_uring_prep_read_fixed(h, fd, r.header, sector_bytes, r.offset, static_cast<int>(header_buffer_index_));
        io_uring_prep_read_fixed(b, fd, r.payload, static_cast<unsigned>(r.payload_bytes), r.payload_offset, chunk);
      }
      prepare(h, uint64_t{r.lane} << 1);
      prepare(b, (uint64_t{r.lane} << 1) | 1);
    } else {
      l.parts_left.store(2, std::memory_order_release);
      io_uring_sqe* h = io_uring_get_sqe(&ring_);
      io_uring_sqe* b = io_uring_get_sqe(&ring_);
      KVTIER_CHECK(h && b, "submission queue full");
      const auto n = static_cast<unsigned>(r.payload_bytes);
      if (r.dir == io_dir::write) {
        io_uring_prep_write(h, fd, r.header, sector_bytes, r.offset);
        io_uring_prep_write(b, fd, r.payload, n, r.payload_offset);
      } else {
        io_uring_prep_read(h, fd, r.header, sector_bytes, r.offset);
        io_uring_prep_read(b, fd, r.payload, n, r.payload_offset);
      }
      prepare(h, uint64_t{r.lane} << 1);
      prepare(b, (uint64_t{r.lane} << 1) | 1);
    }
  }
  if (std::this_thread::get_id() == reaper_id_) {
    reaper_pending_ = true;
    return;
  }
  submit_locked();
}

void uring_page_file::submit_locked() {
  // The kernel may take fewer SQEs than were prepared: it stops at one that
  // fails before it is issued (that one completes with its error). The rest
  // would stay in the ring until some later submit, and a caller waiting on
  // them might never make one, so submit until the ring is empty. (With SQPOLL
  // the kernel's thread takes them all; one submit wakes it.)
  const bool polled = (ring_.flags & IORING_SETUP_SQPOLL) != 0;
  for (;;) {
    int rc = io_uring_submit(&ring_);
    KVTIER_CHECK(rc >= 0 || rc == -EINTR || rc == -EAGAIN || rc == -EBUSY,
                 "io_uring_submit failed with a prepared batch");
    if (polled ? rc >= 0 : io_uring_sq_ready(&ring_) == 0)
      break;
    if (rc <= 0)
      std::this_thread::yield();
  }
}

void uring_page_file::reap() {
  std::vector<std::pair<uint64_t, int64_t>> done;
  bool stop = false;
  while (!stop) {
    io_uring_cqe* cqe = nullptr;
    int rc = io_uring_wait_cqe(&ring_, &cqe);
    if (rc == -EINTR || rc == -EAGAIN)
      continue;
    KVTIER_CHECK(rc == 0, "io_uring_wait_cqe failed");
    unsigned head = 0;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
      ++seen;
      uint64_t data = io_uring_cqe_get_data64(cqe);
      if (data == stop_token) {
        stop = true;
        continue;
      }
      lane& l = lanes_[data >> 1];
      const int left = l.parts_left.load(std::memory_order_acquire);
      if (cqe->res < 0 && l.error == 0)
        l.error = cqe->res;
      else if (cqe->res > 0)
        l.total += cqe->res;
      if (left == 1) {
        const int64_t result = l.error != 0 ? l.error : l.total;
        done.emplace_back(l.id, result);
        l.parts_left.store(0, std::memory_order_release);
      } else {
        l.parts_left.store(left - 1, std::memory_order_relaxed);
      }
    }
    io_uring_cq_advance(&ring_, seen);
    for (auto [id, result] : done)
      callback_(id, result);
    done.clear();
    mutex_lock lock{sq_mutex_};
    if (reaper_pending_) {
      reaper_pending_ = false;
      submit_locked();
    }
  }
}

} // namespace kvtier::io
