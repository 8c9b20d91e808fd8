#pragma once
// kvtier::client — a connection to kvtierd, the node-local KV block store.
//
// The client knows nothing of the wire protocol's bytes (client/ keeps them
// in its .cpp files) and nothing of CAF or actors: a host application links
// it alone. Block bytes never cross the socket: the client maps a shared
// memory region (region.hpp) that the daemon maps too, and gets and sets
// name blocks by their offset in that region.
//
// Invariants:
//  (1) Every block is exactly block_bytes() long (the daemon's setting, told
//      at connect); an offset names the block's first byte in the region, and
//      offset + block_bytes() <= region size, or the daemon refuses the batch.
//  (2) batch_get writes a block's bytes at its offset only for keys it
//      reports found; other offsets are left as they were.
//  (3) batch_set acknowledges a key only once the daemon holds the bytes: a
//      later batch_get from any connection of the same tenant finds them,
//      until the tier evicts them (pinned blocks are never evicted).
//  (4) Keys are the application's block identity; the daemon salts them per
//      tenant, so two tenants never see each other's blocks unless the
//      daemon's configuration shares them.
//
// Threading: one client is used by one thread at a time (calls are
// synchronous request/reply on one connection). Open one client per thread.

#include "client/region.hpp"
#include "client/result.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvtier::client {

/// A block's identity: 128 bits chosen by the application (e.g. a chained
/// prefix hash). {0, 0} is reserved and refused.
struct block_key {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  friend constexpr bool operator==(const block_key&, const block_key&) = default;
};

/// Where to reach the daemon and who is asking.
struct connect_options {
  /// A Unix socket path ("/run/kvtierd.sock", "unix:/path") or a loopback
  /// TCP address ("127.0.0.1:7070", "tcp:127.0.0.1:7070").
  std::string endpoint;
  std::string tenant;
  std::string token;
  /// Each request's whole round trip; an expired call closes the connection.
  int timeout_ms = 10'000;
};

/// What the daemon says about itself and about this tenant.
struct daemon_stats {
  std::uint64_t block_bytes = 0;
  // The tenant's view.
  std::uint64_t tenant_blocks = 0;       // blocks stored under this tenant's salt
  std::uint64_t tenant_quota_blocks = 0; // 0: no quota
  std::uint64_t tenant_pinned = 0;
  std::uint64_t tenant_hits = 0;   // keys found by exists/get
  std::uint64_t tenant_misses = 0; // keys not found by exists/get
  // The daemon's tiers.
  std::uint64_t dram_blocks = 0;
  std::uint64_t dram_capacity_blocks = 0;
  std::uint64_t nvme_blocks = 0;
  std::uint64_t nvme_capacity_blocks = 0;
  std::uint64_t evictions = 0;
  std::uint64_t sessions = 0;
};

class connection; // the socket and the frame codec (client/connection.hpp)

class client {
public:
  /// Connects, says hello (tenant, token) and learns the block size.
  /// Errors: errc::unreachable, errc::refused (wrong token or tenant),
  /// errc::protocol (the other end is not a kvtierd of this version).
  static result<client> connect(const connect_options& options);
  static result<client> connect(const std::string& endpoint, const std::string& tenant, const std::string& token);

  client(client&&) noexcept;
  client& operator=(client&&) noexcept;
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  ~client();

  /// Bytes per block, as the daemon is configured.
  std::uint64_t block_bytes() const;

  /// Creates a shared memory region of `bytes` (rounded up to the page size),
  /// maps it here and has the daemon map it: the one region this
  /// connection's gets and sets address. A second call replaces the first.
  /// Errors: errc::refused (over the daemon's region limit), errc::system.
  result<region*> map_region(std::size_t bytes);
  /// The region mapped by map_region, or nullptr.
  region* mapped_region();

  /// How many of `keys`, from the first, the daemon holds (stops at the
  /// first miss): the prefix an engine can load instead of recomputing.
  result<std::size_t> batch_exists(std::span<const block_key> keys);

  /// Copies each found block into the region at offsets[i]; found[i] says
  /// which. keys.size() == offsets.size().
  result<std::vector<bool>> batch_get(std::span<const block_key> keys, std::span<const std::uint64_t> offsets);

  /// Stores block_bytes() from the region at offsets[i] under keys[i];
  /// stored[i] is true once the daemon holds them (a key it already held
  /// counts as stored). Errors: errc::quota_exceeded (nothing stored).
  result<std::vector<bool>> batch_set(std::span<const block_key> keys, std::span<const std::uint64_t> offsets);

  /// Pins the keys the daemon holds against eviction; returns how many were
  /// pinned. Pins belong to this connection and end with it or by release.
  result<std::size_t> pin(std::span<const block_key> keys);
  /// Ends this connection's pins on the keys; returns how many it released.
  result<std::size_t> release(std::span<const block_key> keys);

  result<daemon_stats> stats();

private:
  explicit client(std::unique_ptr<connection> conn);
  std::unique_ptr<connection> conn_;
};

} // namespace kvtier::client
