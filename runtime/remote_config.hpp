#pragma once
// The [remote] table: where a real run's remote tier (L4) lives. Its size is
// the cluster's `remote_capacity` ([cluster], runtime/cluster_config.hpp), the
// one name the simulation models the same tier by; this table says only how
// to reach the server.
//
// Invariants (validate): kind = redis needs [cluster] remote_capacity of at
// least one block; a port is 1..65535; a unix socket, when named, is used
// instead of host and port; timeouts are 1 ms .. 10 min. In a real run the
// remote tier takes the place of the NVMe tier below DRAM ([tiers.nvme]
// enabled = false), so the block manager's lowest tier is one or the other.

#include <cstdint>
#include <string>

namespace kvtier {

enum class remote_kind : uint8_t { none, redis };

struct remote_config {
  remote_kind kind = remote_kind::none;
  std::string host = "127.0.0.1";
  uint32_t port = 6379;
  std::string unix_socket; // a path: connect through it instead of host:port
  uint32_t connect_timeout_ms = 2000;
  uint32_t command_timeout_ms = 2000;
  std::string key_prefix = "kvtier:"; // keys are PREFIX<salt>:<hash>
};

} // namespace kvtier
