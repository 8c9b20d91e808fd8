#include "daemon/ready_set.hpp"

#include "runtime/error.hpp"

#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

namespace kvtier::daemon {

namespace asio = boost::asio;

namespace {
// Events taken per epoll_wait: enough that a loaded io thread serves
// hundreds of connections per wake-up; the rest wait for the next round,
// after the io_context's other handlers (timers, accepts, copy completions).
constexpr int batch = 256;
constexpr std::uint32_t read_events = EPOLLIN | EPOLLRDHUP | EPOLLET;
} // namespace

caf::expected<std::unique_ptr<ready_set>> ready_set::open(asio::io_context& io) {
  const int fd = ::epoll_create1(EPOLL_CLOEXEC);
  if (fd < 0)
    return make_error(errc::io_failure, std::string("epoll_create1 for the sessions: ") + std::strerror(errno));
  std::unique_ptr<ready_set> s(new ready_set(io, fd));
  s->arm();
  return s;
}

ready_set::ready_set(asio::io_context& io, int epoll_fd) : epoll_(io, epoll_fd) {
}

ready_set::~ready_set() {
  close();
}

bool ready_set::watch(int fd, watcher* w) {
  epoll_event e{read_events, {.ptr = w}};
  return ::epoll_ctl(epoll_.native_handle(), EPOLL_CTL_ADD, fd, &e) == 0;
}

void ready_set::want_write(int fd, watcher* w, bool on) {
  epoll_event e{read_events | (on ? EPOLLOUT : 0u), {.ptr = w}};
  ::epoll_ctl(epoll_.native_handle(), EPOLL_CTL_MOD, fd, &e);
}

void ready_set::forget(int fd) {
  if (epoll_.is_open())
    ::epoll_ctl(epoll_.native_handle(), EPOLL_CTL_DEL, fd, nullptr);
}

void ready_set::close() {
  boost::system::error_code ignored;
  epoll_.close(ignored);
}

void ready_set::arm() {
  epoll_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    if (ec || !epoll_.is_open())
      return;
    drain();
    arm();
  });
}

void ready_set::drain() {
  std::array<epoll_event, batch> events;
  const int n = ::epoll_wait(epoll_.native_handle(), events.data(), batch, 0);
  for (int i = 0; i < n; ++i)
    static_cast<watcher*>(events[static_cast<std::size_t>(i)].data.ptr)
        ->on_ready(events[static_cast<std::size_t>(i)].events);
}

} // namespace kvtier::daemon
