#include "daemon/session.hpp"

#include "daemon/server.hpp"

#include <boost/asio/post.hpp>

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace kvtier::daemon {

using client::errc;

namespace {
// What one read asks the kernel for: a full batch frame in a few reads.
constexpr std::size_t read_chunk = 64 * 1024;
constexpr int max_fds_held = 4; // descriptors passed ahead of their map_region
// Replies queued before they are written: a client that pipelines small
// requests without reading its replies holds at most about this much.
constexpr std::size_t max_queued_reply_bytes = 256 * 1024;
} // namespace

session::session(server& owner, int fd, bool is_unix) : owner_(owner), fd_(fd), is_unix_(is_unix) {
}

session::~session() {
  for (int fd : fds_)
    ::close(fd);
  unmap();
  if (fd_ >= 0)
    ::close(fd_);
}

void session::start() {
  owner_.metrics().session_opened();
  if (!owner_.ready().watch(fd_, this)) {
    close();
    return;
  }
  serve(); // a client may have sent its hello with the connect
}

void session::unmap() {
  if (region_)
    ::munmap(region_, region_bytes_);
  region_ = nullptr;
  region_bytes_ = 0;
}

void session::close() {
  if (!open_)
    return;
  open_ = false;
  for (auto& [hash, count] : pins_)
    for (std::uint32_t i = 0; i < count; ++i)
      owner_.store().unpin(hash);
  pins_.clear();
  owner_.ready().forget(fd_);
  ::close(fd_);
  fd_ = -1;
  owner_.closed(this);
}

void session::on_ready(std::uint32_t events) {
  if (!open_)
    return; // closed earlier in the same batch of events
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
    readable_ = true;
  serve();
}

void session::serve() {
  if (serving_)
    return; // a store completion inside serve(): its reply is queued, the loop below goes on
  serving_ = true;
  for (;;) {
    bool at_limit = true; // stopped by the queued replies' limit, with frames still buffered
    while (open_ && !in_store_ && !close_after_ && out_end_ - out_sent_ < max_queued_reply_bytes)
      if (!decode_one()) {
        at_limit = false;
        break;
      }
    if (!open_ || !flush())
      break; // closed, or the client has not read its replies: wait for room
    if (close_after_) {
      close();
      break;
    }
    if (in_store_)
      break; // the completion queues the reply and calls serve()
    if (at_limit)
      continue;
    if (!readable_ || !read_some())
      break; // wait for the next edge
  }
  serving_ = false;
}

bool session::read_some() {
  for (;;) {
    if (in_begin_ > 0) { // keep the unread bytes at the front
      std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
      in_end_ -= in_begin_;
      in_begin_ = 0;
    }
    if (in_.size() < in_end_ + read_chunk)
      in_.resize(in_end_ + read_chunk); // grows only: no per-read fill
    iovec iov{in_.data() + in_end_, read_chunk};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds_held)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (is_unix_) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
    }
    const ssize_t got = ::recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (got == 0) { // the client is gone
      close();
      return false;
    }
    if (got < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        readable_ = false;
        return false;
      }
      close();
      return false;
    }
    in_end_ += static_cast<std::size_t>(got);
    bool passed = false; // a read stops at descriptors: more may follow them
    if (is_unix_ && msg.msg_controllen > 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
          continue;
        passed = true;
        const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < n; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          fds_.push_back(fd);
        }
      }
      while (fds_.size() > max_fds_held) { // a client passing descriptors it never uses
        ::close(fds_.front());
        fds_.pop_front();
      }
    }
    if (static_cast<std::size_t>(got) < read_chunk && !passed && !(msg.msg_flags & MSG_CTRUNC))
      readable_ = false; // the kernel had no more: the next bytes bring an edge
    return true;
  }
}

int session::send_queued() {
  while (out_sent_ < out_end_) {
    const ssize_t sent = ::send(fd_, out_.data() + out_sent_, out_end_ - out_sent_, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent > 0) {
      out_sent_ += static_cast<std::size_t>(sent);
      continue;
    }
    if (sent < 0 && errno == EINTR)
      continue;
    return sent < 0 ? errno : EPIPE;
  }
  return 0;
}

bool session::flush() {
  if (const int e = send_queued(); e != 0) {
    if (e != EAGAIN && e != EWOULDBLOCK) {
      close();
      return false;
    }
    if (!want_write_) {
      owner_.ready().want_write(fd_, this, true);
      want_write_ = true;
    }
    return false;
  }
  out_end_ = out_sent_ = 0;
  if (want_write_) {
    owner_.ready().want_write(fd_, this, false);
    want_write_ = false;
  }
  return true;
}

bool session::decode_one() {
  const std::byte* at = in_.data() + in_begin_;
  const std::size_t buffered = in_end_ - in_begin_;
  if (buffered < wire::header_bytes)
    return false;
  started_ = std::chrono::steady_clock::now();
  auto h = wire::decode_header(std::span<const std::byte, wire::header_bytes>(at, wire::header_bytes),
                               static_cast<std::uint32_t>(owner_.config().max_frame_bytes));
  if (!h) {
    owner_.metrics().frame_rejected();
    reply(wire::op::hello, 0, h.err().code, h.err().message, {}, true);
    return true;
  }
  if (buffered < wire::header_bytes + h->length)
    return false;
  auto decoded = wire::decode_request(*h, std::span(at + wire::header_bytes, h->length), request_);
  in_begin_ += wire::header_bytes + h->length;
  if (in_begin_ == in_end_)
    in_begin_ = in_end_ = 0;
  if (!decoded) {
    const auto op = wire::known_op(h->op) ? static_cast<wire::op>(h->op) : wire::op::hello;
    reply(op, h->request_id, decoded.err().code, decoded.err().message);
    return true;
  }
  handle(request_);
  return true;
}

void session::reply(wire::op op, std::uint64_t id, errc status, std::string_view message,
                    std::span<const std::byte> body, bool then_close) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  owner_.metrics().record(op, seconds, status);
  if (status == errc::quota_exceeded && tenant_)
    ++owner_.tenants()[*tenant_].refusals;
  if (!open_)
    return;
  const std::size_t bytes = wire::reply_bytes(status, message, body);
  if (out_.size() < out_end_ + bytes)
    out_.resize(std::max(out_end_ + bytes, 2 * out_.size())); // grows only
  out_end_ += wire::write_reply(std::span(out_).subspan(out_end_), op, id, status, message, body);
  if (then_close)
    close_after_ = true;
}

void session::handle(const wire::request& q) {
  if (owner_.stopping())
    return refuse(q, errc::closed, "kvtierd is shutting down", true);
  if (q.kind == wire::op::hello)
    return on_hello(q);
  if (!tenant_)
    return refuse(q, errc::refused, std::string(wire::to_string(q.kind)) + " before hello: say who you are first");
  switch (q.kind) {
    case wire::op::hello:
      break;
    case wire::op::map_region:
      return on_map_region(q);
    case wire::op::exists:
      return on_exists(q);
    case wire::op::get:
      return on_get(q);
    case wire::op::set:
      return on_set(q);
    case wire::op::pin:
      return on_pin(q, true);
    case wire::op::release:
      return on_pin(q, false);
    case wire::op::stats:
      return on_stats(q);
  }
}

void session::on_hello(const wire::request& q) {
  if (tenant_)
    return refuse(q, errc::bad_request, "hello twice on one connection");
  auto t = owner_.tenants().authenticate(q.tenant, q.token);
  if (!t)
    return refuse(q, errc::refused, "unknown tenant \"" + q.tenant + "\" or wrong token", true);
  tenant_ = *t;
  wire::writer w;
  w.u64(owner_.store().block_bytes());
  w.u32(wire::max_batch);
  reply(q.kind, q.id, errc::ok, "", w.out());
}

void session::on_map_region(const wire::request& q) {
  if (q.region_bytes == 0 || q.region_bytes > owner_.config().max_region_bytes)
    return refuse(q, errc::refused,
                  "a region of " + std::to_string(q.region_bytes) + " bytes; the limit is " +
                      std::to_string(owner_.config().max_region_bytes) + " ([daemon] max_region_bytes)");
  int fd = -1;
  if (q.shm_name.empty()) {
    if (!is_unix_ || fds_.empty())
      return refuse(q, errc::bad_request, "map_region without a name passes its memfd over the Unix socket");
    fd = fds_.front();
    fds_.pop_front();
    // A client could shrink its memfd under the daemon's copies (SIGBUS):
    // only a region sealed against shrinking is taken.
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
      ::close(fd);
      return refuse(q, errc::bad_request, "the region's memfd must be sealed with F_SEAL_SHRINK");
    }
  } else {
    if (q.shm_name.size() < 2 || q.shm_name[0] != '/' || q.shm_name.find('/', 1) != std::string::npos ||
        !q.shm_name.starts_with("/kvtier-"))
      return refuse(q, errc::bad_request, "shm name \"" + q.shm_name + "\": expected /kvtier-<name>");
    fd = ::shm_open(q.shm_name.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0)
      return refuse(q, errc::bad_request, "shm_open " + q.shm_name + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) < q.region_bytes) {
    ::close(fd);
    return refuse(q, errc::bad_request,
                  "the region is smaller than the " + std::to_string(q.region_bytes) + " bytes it claims");
  }
  void* p = ::mmap(nullptr, q.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED)
    return refuse(q, errc::system, std::string("mmap of the region: ") + std::strerror(errno));
  unmap();
  region_ = static_cast<std::byte*>(p);
  region_bytes_ = q.region_bytes;
  reply(q.kind, q.id, errc::ok, "");
}

const std::vector<block_hash>& session::salted(const wire::request& q) {
  const auto salt = owner_.tenants()[*tenant_].salt;
  hashes_.clear();
  for (const auto& k : q.keys)
    hashes_.push_back(salted_key(k.lo, k.hi, salt));
  return hashes_;
}

bool session::check_offsets(const wire::request& q) {
  if (!region_) {
    refuse(q, errc::bad_request,
           std::string(wire::to_string(q.kind)) + " before map_region: no region to copy through");
    return false;
  }
  const std::uint64_t block = owner_.store().block_bytes();
  for (std::size_t i = 0; i < q.offsets.size(); ++i)
    if (block > region_bytes_ || q.offsets[i] > region_bytes_ - block) {
      refuse(q, errc::bad_request,
             "offset " + std::to_string(q.offsets[i]) + " (key " + std::to_string(i) + "): a block of " +
                 std::to_string(block) + " bytes there leaves the region of " + std::to_string(region_bytes_) +
                 " bytes");
      return false;
    }
  return true;
}

namespace {

std::array<std::byte, 4> u32_body(std::uint32_t v) {
  std::array<std::byte, 4> b;
  std::memcpy(b.data(), &v, 4);
  return b;
}

} // namespace

void session::on_exists(const wire::request& q) {
  const auto& hashes = salted(q);
  const auto n = owner_.store().leading_hits(hashes);
  auto& t = owner_.tenants()[*tenant_];
  t.hits += n;
  t.misses += n < hashes.size() ? 1 : 0;
  reply(q.kind, q.id, errc::ok, "", u32_body(static_cast<std::uint32_t>(n)));
}

void session::stored(wire::op op, std::uint64_t id, const std::vector<bool>& flags) {
  in_store_ = false;
  // u32 n, then a byte per key; a batch's flags fit the stack (wire::max_batch).
  std::array<std::byte, 4 + wire::max_batch> body;
  const auto n = static_cast<std::uint32_t>(flags.size());
  std::memcpy(body.data(), &n, 4);
  for (std::size_t i = 0; i < flags.size(); ++i)
    body[4 + i] = std::byte{flags[i] ? std::uint8_t{1} : std::uint8_t{0}};
  reply(op, id, errc::ok, "", std::span(body.data(), 4 + flags.size()));
  // A completion may run inside the store's own bookkeeping (another batch
  // finishing): the reply goes out now, but what may enter the store again
  // (the next frame, closing on a failed write, which unpins) runs from a
  // handler of its own.
  if (!serving_ && open_) {
    (void)send_queued(); // what is left, or a failure, is serve()'s
    boost::asio::post(owner_.io(), [self = shared_from_this()] { self->serve(); });
  }
}

void session::on_get(const wire::request& q) {
  if (!check_offsets(q))
    return;
  const auto& hashes = salted(q);
  std::vector<block_store::get_item> items;
  items.reserve(hashes.size());
  for (std::size_t i = 0; i < hashes.size(); ++i)
    items.push_back({hashes[i], region_ + q.offsets[i]});
  in_store_ = true;
  owner_.store().get(std::move(items), [self = shared_from_this(), kind = q.kind, id = q.id](std::vector<bool> found) {
    auto& t = self->owner_.tenants()[*self->tenant_];
    for (bool f : found)
      (f ? t.hits : t.misses) += 1;
    self->stored(kind, id, found);
  });
}

void session::on_set(const wire::request& q) {
  if (!check_offsets(q))
    return;
  const auto& hashes = salted(q);
  auto& store = owner_.store();
  const auto& t = owner_.tenants()[*tenant_];
  if (const auto quota = t.config.quota_blocks; quota > 0) {
    const auto held = store.tenant_blocks(*tenant_);
    const auto adds = store.new_blocks(hashes);
    if (held + adds > quota)
      return refuse(q, errc::quota_exceeded,
                    "tenant \"" + t.config.name + "\" holds " + std::to_string(held) + " of its " +
                        std::to_string(quota) + " blocks; this batch would add " + std::to_string(adds));
  }
  std::vector<block_store::set_item> items;
  items.reserve(hashes.size());
  for (std::size_t i = 0; i < hashes.size(); ++i)
    items.push_back({hashes[i], region_ + q.offsets[i]});
  in_store_ = true;
  store.set(*tenant_, t.salt, std::move(items),
            [self = shared_from_this(), kind = q.kind, id = q.id](std::vector<bool> flags) {
              self->stored(kind, id, flags);
            });
}

void session::on_pin(const wire::request& q, bool pin) {
  std::uint32_t n = 0;
  for (const auto& h : salted(q)) {
    if (pin) {
      if (owner_.store().pin(h)) {
        ++pins_[h];
        ++n;
      }
    } else if (auto it = pins_.find(h); it != pins_.end()) {
      owner_.store().unpin(h);
      if (--it->second == 0)
        pins_.erase(it);
      ++n;
    }
  }
  reply(q.kind, q.id, errc::ok, "", u32_body(n));
}

void session::on_stats(const wire::request& q) {
  auto& store = owner_.store();
  const auto& t = owner_.tenants()[*tenant_];
  std::uint64_t pinned = 0;
  for (const auto& [h, count] : pins_)
    pinned += count;
  const auto& c = store.counters();
  wire::writer w;
  for (std::uint64_t v : {store.block_bytes(), store.tenant_blocks(*tenant_), t.config.quota_blocks, pinned, t.hits,
                          t.misses, std::uint64_t{store.dram_used()}, std::uint64_t{store.dram_capacity()},
                          std::uint64_t{store.nvme_used()}, std::uint64_t{store.nvme_capacity()},
                          c.evictions_dram + c.evictions_nvme, std::uint64_t{owner_.session_count()}})
    w.u64(v);
  reply(q.kind, q.id, errc::ok, "", w.out());
}

} // namespace kvtier::daemon
