#pragma once
// One client connection: reads frames (and the descriptors passed with
// them), runs one request at a time against the store, queues its reply and
// writes the replies of everything it decoded in one send.
//
// Invariants:
//  (1) Requests are answered in order, one at a time: a frame is decoded
//      only once the previous request's reply is queued, and the socket is
//      read only when no whole frame is buffered and every queued reply has
//      been written. A client that floods without reading its replies stalls
//      only itself: the daemon holds at most one read of frames and their
//      replies per session.
//  (2) A frame whose header is unreadable (magic, version, oversized) gets an
//      error reply and closes the connection once it is written: after it the
//      stream has no frame boundaries to trust. A well-framed request the
//      daemon refuses (unknown op, malformed fields, out-of-order, quota)
//      gets an error reply and the session goes on; a wrong token closes it.
//  (3) Pins end with the session; the region stays mapped while a move into
//      it is in flight (the session outlives its connection until then).
//  (4) The socket is read once per readiness edge until a read comes back
//      short (the kernel had no more), not until EAGAIN; a read that stops at
//      passed descriptors is not short. No frame or reply allocates once the
//      session's buffers have grown to its largest.
// Threading: the io thread only (ready_set events and the store's completions).

#include "client/wire.hpp"
#include "daemon/ready_set.hpp"
#include "runtime/block_hash.hpp"

#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace kvtier::daemon {

class server;

class session final : public std::enable_shared_from_this<session>, public ready_set::watcher {
public:
  session(server& owner, int fd, bool is_unix);
  ~session();
  void start();
  void close();
  void on_ready(std::uint32_t events) override;

private:
  /// Decodes and answers buffered frames, writes the replies, reads more;
  /// until the session must wait (for bytes, room to write, or the store).
  void serve();
  /// Decodes and handles one buffered frame; false when none is whole.
  bool decode_one();
  /// One read into the buffer; false when nothing came (or the peer is gone).
  bool read_some();
  /// Writes the queued replies; false while some are left (or it failed).
  bool flush();
  /// Sends what the socket takes of the queued replies: 0 once all are
  /// written, else the errno that stopped it (EAGAIN: no room yet).
  int send_queued();
  void handle(const wire::request& q);
  void reply(wire::op op, std::uint64_t id, client::errc status, std::string_view message,
             std::span<const std::byte> body = {}, bool then_close = false);
  void refuse(const wire::request& q, client::errc status, const std::string& message, bool then_close = false) {
    reply(q.kind, q.id, status, message, {}, then_close);
  }
  /// The reply of a get or set, from the store's completion.
  void stored(wire::op op, std::uint64_t id, const std::vector<bool>& flags);
  void on_hello(const wire::request& q);
  void on_map_region(const wire::request& q);
  void on_exists(const wire::request& q);
  void on_get(const wire::request& q);
  void on_set(const wire::request& q);
  void on_pin(const wire::request& q, bool pin);
  void on_stats(const wire::request& q);
  /// The batch's offsets each name a whole block inside the region.
  bool check_offsets(const wire::request& q);
  /// The request's keys salted for this tenant, in hashes_.
  const std::vector<block_hash>& salted(const wire::request& q);
  void unmap();

  server& owner_;
  int fd_;
  bool is_unix_;
  bool open_ = true;
  bool in_store_ = false;     // a get or set is in the store; its reply is not queued yet
  bool readable_ = true;      // bytes may be waiting: no read came back short since the last edge
  bool want_write_ = false;   // room to write is asked of the ready set
  bool close_after_ = false;  // close once the queued replies are written
  bool serving_ = false;      // serve() is on the stack: a completion inside it only queues
  std::vector<std::byte> in_; // bytes [in_begin_, in_end_) are received, not yet decoded
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;
  std::deque<int> fds_;        // descriptors received, not yet claimed by a map_region
  std::vector<std::byte> out_; // replies [0, out_end_) queued, [0, out_sent_) of them written
  std::size_t out_end_ = 0;
  std::size_t out_sent_ = 0;
  wire::request request_; // the frame being handled, its vectors kept between frames
  std::vector<block_hash> hashes_;
  std::chrono::steady_clock::time_point started_;
  std::optional<std::uint32_t> tenant_;
  std::byte* region_ = nullptr;
  std::size_t region_bytes_ = 0;
  std::unordered_map<block_hash, std::uint32_t> pins_;
};

} // namespace kvtier::daemon
