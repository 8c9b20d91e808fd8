#pragma once
// The sessions' sockets in one edge-triggered epoll set that the io_context
// waits on as a single descriptor: one wake-up of the io thread serves every
// connection that became ready since the last, and re-arming costs one
// epoll_ctl per wake-up instead of one per request (Asio re-arms a
// descriptor's wait with an epoll_ctl each time, and posts each completion).
//
// Invariants:
//  (1) A watched descriptor is reported once per edge (new bytes, the peer
//      gone, room to write when asked): a watcher that stops reading before
//      EAGAIN must remember that bytes may be left.
//  (2) `on_ready` is called only on the io thread, from the io_context, for
//      a descriptor watched at the time of the epoll_wait that reported it;
//      the watcher's owner keeps it alive until the handler that forgot it
//      has returned (a batch may still hold its pointer).
// Threading: everything on the io thread.

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <memory>

namespace kvtier::daemon {

class ready_set {
public:
  class watcher {
  public:
    /// `events`: the epoll bits reported (EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLHUP, EPOLLERR).
    virtual void on_ready(std::uint32_t events) = 0;

  protected:
    ~watcher() = default;
  };

  static caf::expected<std::unique_ptr<ready_set>> open(boost::asio::io_context& io);
  ~ready_set();

  /// Reports `fd` becoming readable or hung up to `w`.
  bool watch(int fd, watcher* w);
  /// Also reports room to write (on: after a short write) or stops (off).
  void want_write(int fd, watcher* w, bool on);
  /// Stops reporting `fd` (before it is closed).
  void forget(int fd);
  /// Stops waiting; nothing is reported after it.
  void close();

private:
  ready_set(boost::asio::io_context& io, int epoll_fd);
  void arm();
  void drain();

  boost::asio::posix::stream_descriptor epoll_;
};

} // namespace kvtier::daemon
