#include "daemon/session.hpp"

#include "daemon/server.hpp"

#include <boost/asio/write.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvtier::daemon {

using client::errc;
namespace asio = boost::asio;

namespace {
// What one read asks the kernel for: a full batch frame in a few reads.
constexpr std::size_t read_chunk = 64 * 1024;
constexpr int max_fds_held = 4; // descriptors passed ahead of their map_region
} // namespace

session::session(server& owner, asio::io_context& io, int fd, bool is_unix)
    : owner_(owner), socket_(io, fd), is_unix_(is_unix) {
}

session::~session() {
  for (int fd : fds_)
    ::close(fd);
  unmap();
}

void session::start() {
  owner_.metrics().session_opened();
  process();
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
  boost::system::error_code ignored;
  socket_.close(ignored);
  owner_.closed(this);
}

void session::wait_readable() {
  if (reading_ || !open_)
    return;
  reading_ = true;
  socket_.async_wait(asio::posix::stream_descriptor::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       self->reading_ = false;
                       if (ec || !self->open_) {
                         self->close();
                         return;
                       }
                       self->on_readable();
                     });
}

void session::on_readable() {
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
    const ssize_t got = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    in_end_ += got > 0 ? static_cast<std::size_t>(got) : 0;
    if (got > 0 && is_unix_) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
          continue;
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
    if (got == 0) { // the client is gone
      close();
      return;
    }
    if (got < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        break;
      close();
      return;
    }
    if (static_cast<std::size_t>(got) < read_chunk)
      break;
  }
  process();
}

void session::process() {
  if (!open_ || busy_)
    return;
  const std::byte* at = in_.data() + in_begin_;
  const std::size_t buffered = in_end_ - in_begin_;
  if (buffered < wire::header_bytes) {
    wait_readable();
    return;
  }
  started_ = std::chrono::steady_clock::now();
  auto h = wire::decode_header(std::span<const std::byte, wire::header_bytes>(at, wire::header_bytes),
                               static_cast<std::uint32_t>(owner_.config().max_frame_bytes));
  if (!h) {
    owner_.metrics().frame_rejected();
    reply(wire::op::hello, 0, h.err().code, h.err().message, {}, true);
    return;
  }
  if (buffered < wire::header_bytes + h->length) {
    wait_readable();
    return;
  }
  auto q = wire::decode_request(*h, std::span(at + wire::header_bytes, h->length));
  in_begin_ += wire::header_bytes + h->length;
  if (in_begin_ == in_end_)
    in_begin_ = in_end_ = 0;
  if (!q) {
    const auto op = wire::known_op(h->op) ? static_cast<wire::op>(h->op) : wire::op::hello;
    reply(op, h->request_id, q.err().code, q.err().message);
    return;
  }
  handle(std::move(*q));
}

void session::reply(wire::op op, std::uint64_t id, errc status, std::string_view message,
                    std::span<const std::byte> body, bool then_close) {
  busy_ = true;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  owner_.metrics().record(op, seconds, status);
  if (status == errc::quota_exceeded && tenant_)
    ++owner_.tenants()[*tenant_].refusals;
  out_ = wire::encode_reply(op, id, status, message, body);
  if (!open_)
    return;
  asio::async_write(socket_, asio::buffer(out_),
                    [self = shared_from_this(), then_close](const boost::system::error_code& ec, std::size_t) {
                      self->busy_ = false;
                      if (ec || then_close) {
                        self->close();
                        return;
                      }
                      self->process();
                    });
}

void session::handle(wire::request q) {
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

std::vector<block_hash> session::salted(const wire::request& q) const {
  const auto salt = owner_.tenants()[*tenant_].salt;
  std::vector<block_hash> out;
  out.reserve(q.keys.size());
  for (const auto& k : q.keys)
    out.push_back(salted_key(k.lo, k.hi, salt));
  return out;
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

void session::on_exists(const wire::request& q) {
  const auto hashes = salted(q);
  const auto n = owner_.store().leading_hits(hashes);
  auto& t = owner_.tenants()[*tenant_];
  t.hits += n;
  t.misses += n < hashes.size() ? 1 : 0;
  wire::writer w;
  w.u32(static_cast<std::uint32_t>(n));
  reply(q.kind, q.id, errc::ok, "", w.out());
}

namespace {

std::vector<std::byte> flags_body(const std::vector<bool>& flags) {
  wire::writer w;
  w.u32(static_cast<std::uint32_t>(flags.size()));
  for (bool f : flags)
    w.u8(f ? 1 : 0);
  return std::move(w.out());
}

} // namespace

void session::on_get(const wire::request& q) {
  if (!check_offsets(q))
    return;
  const auto hashes = salted(q);
  std::vector<block_store::get_item> items;
  items.reserve(hashes.size());
  for (std::size_t i = 0; i < hashes.size(); ++i)
    items.push_back({hashes[i], region_ + q.offsets[i]});
  owner_.store().get(std::move(items), [self = shared_from_this(), kind = q.kind, id = q.id](std::vector<bool> found) {
    auto& t = self->owner_.tenants()[*self->tenant_];
    for (bool f : found)
      (f ? t.hits : t.misses) += 1;
    self->reply(kind, id, errc::ok, "", flags_body(found));
  });
}

void session::on_set(const wire::request& q) {
  if (!check_offsets(q))
    return;
  const auto hashes = salted(q);
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
  store.set(*tenant_, t.salt, std::move(items),
            [self = shared_from_this(), kind = q.kind, id = q.id](std::vector<bool> stored) {
              self->reply(kind, id, errc::ok, "", flags_body(stored));
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
  wire::writer w;
  w.u32(n);
  reply(q.kind, q.id, errc::ok, "", w.out());
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
