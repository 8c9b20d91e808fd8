#pragma once
// One blocking socket to kvtierd (Unix or loopback TCP) and the round trip of
// a frame: send a request (with a descriptor, over a Unix socket), read the
// reply with the same id. Internal to client/.
//
// Invariant: after any failed round trip the connection is closed and every
// later call fails with errc::closed: a reply is never matched to the wrong
// request.

#include "client/region.hpp"
#include "client/result.hpp"
#include "client/wire.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace kvtier::client {

class connection {
public:
  static result<std::unique_ptr<connection>> open(const std::string& endpoint, int timeout_ms);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  bool is_unix() const { return unix_; }
  /// Sends `q` (its id is assigned here), passing `fd` along when >= 0, and
  /// returns the reply; a reply whose status is not ok is returned as its error.
  result<wire::reply> call(wire::request q, int fd = -1);

  // What hello and map_region established.
  std::uint64_t block_bytes = 0;
  std::unique_ptr<region> mapped;

private:
  connection(int fd, bool is_unix) : fd_(fd), unix_(is_unix) {}
  error fail(errc code, std::string message);
  int fd_ = -1;
  bool unix_ = true;
  std::uint64_t next_id_ = 1;
  std::vector<std::byte> in_;
};

} // namespace kvtier::client
