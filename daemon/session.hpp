#pragma once
// One client connection: reads frames (and the descriptors passed with
// them), runs one request at a time against the store, writes its reply.
//
// Invariants:
//  (1) Requests are answered in order, one at a time: the next frame is
//      read only once the previous reply is written, so a client that floods
//      without reading its replies stalls only itself, and the daemon holds at
//      most one frame of max_frame_bytes per session.
//  (2) A frame whose header is unreadable (magic, version, oversized) gets an
//      error reply and closes the connection: after it the stream has no
//      frame boundaries to trust. A well-framed request the daemon refuses
//      (unknown op, malformed fields, out-of-order, quota) gets an error reply
//      and the session goes on; a wrong token closes it.
//  (3) Pins end with the session; the region stays mapped while a move into
//      it is in flight (the session outlives its connection until then).

#include "client/wire.hpp"
#include "runtime/block_hash.hpp"

#include <boost/asio/posix/stream_descriptor.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kvtier::daemon {

class server;

class session : public std::enable_shared_from_this<session> {
public:
  session(server& owner, boost::asio::io_context& io, int fd, bool is_unix);
  ~session();
  void start();
  void close();

private:
  void wait_readable();
  void on_readable();
  void process();
  void handle(wire::request q);
  void reply(wire::op op, std::uint64_t id, client::errc status, std::string_view message,
             std::span<const std::byte> body = {}, bool then_close = false);
  void refuse(const wire::request& q, client::errc status, const std::string& message, bool then_close = false) {
    reply(q.kind, q.id, status, message, {}, then_close);
  }
  void on_hello(const wire::request& q);
  void on_map_region(const wire::request& q);
  void on_exists(const wire::request& q);
  void on_get(const wire::request& q);
  void on_set(const wire::request& q);
  void on_pin(const wire::request& q, bool pin);
  void on_stats(const wire::request& q);
  /// The batch's offsets each name a whole block inside the region.
  bool check_offsets(const wire::request& q);
  std::vector<block_hash> salted(const wire::request& q) const;
  void unmap();

  server& owner_;
  boost::asio::posix::stream_descriptor socket_;
  bool is_unix_;
  bool open_ = true;
  bool busy_ = false;         // a request is in progress or its reply is being written
  bool reading_ = false;      // an async_wait for readability is outstanding
  std::vector<std::byte> in_; // bytes [in_begin_, in_end_) are received, not yet decoded
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::deque<int> fds_; // descriptors received, not yet claimed by a map_region
  std::vector<std::byte> out_;
  std::chrono::steady_clock::time_point started_;
  std::optional<std::uint32_t> tenant_;
  std::byte* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  std::unordered_map<block_hash, std::uint32_t> pins_;
};

} // namespace kvtier::daemon
