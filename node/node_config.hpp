#pragma once
// A cluster node's configuration: what `kvtierd --role ...` reads from the
// [node] table (and the router's [[router.node]] list) of its TOML file.
//
// Invariants: a config that read_node_config returns names a role; a prefill,
// decode or both node names a Redis server and a block geometry the remote
// tier can hold; a router names at least one node, each with a unique name
// and a loopback address. Every mistake is a located error (file:line:column,
// table, key, what was expected).

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::node {

enum class node_role : uint8_t { prefill, decode, both, router };

std::string_view to_string(node_role role);
/// "prefill" | "decode" | "both" | "router", or nullopt.
std::optional<node_role> role_of(std::string_view name);

/// Whether a node of `role` takes prefills, decodes.
constexpr bool prefills(node_role role) {
  return role == node_role::prefill || role == node_role::both;
}
constexpr bool decodes(node_role role) {
  return role == node_role::decode || role == node_role::both;
}

/// A node the router knows: its name, what it does and where it listens.
struct member_config {
  std::string name;
  node_role role = node_role::decode;
  std::string host = "127.0.0.1";
  uint16_t port = 0;
};

struct node_config {
  node_role role = node_role::both;
  std::string name;               // in counters and results; default: the role and port
  std::string host = "127.0.0.1"; // where the node actor is published (loopback only)
  uint16_t port = 0;              // 0: any free port, printed at start
  // The stand-in compute's geometry: a block holds block_tokens tokens' KV
  // in block_bytes bytes.
  uint32_t block_tokens = 16;
  uint64_t block_bytes = 64 * 1024;
  uint32_t dram_blocks = 1024; // the node's own tier
  // The modeled compute: prefill at this many tokens per second (0: as fast
  // as the KV bytes are produced), one decode step every decode_step_us.
  double prefill_tokens_per_s = 0;
  uint64_t decode_step_us = 1000;
  // The shared remote store.
  std::string redis_host = "127.0.0.1";
  uint16_t redis_port = 6379;
  std::string key_prefix = "kvtier:";
  // Liveness: BASP heartbeats every heartbeat_ms; a peer silent for
  // connection_timeout_ms is dropped (a killed process is dropped at once,
  // when its connection closes). At least 250 ms: cluster_client's
  // heartbeats come every 100 ms.
  uint32_t heartbeat_ms = 100;
  uint32_t connection_timeout_ms = 1000;
  // Router only: the nodes it assigns requests to.
  std::vector<member_config> members;
};

/// The node config of `path`, with `role_flag` (kvtierd --role) over the
/// file's role; nullopt when the file has no [node] table and no role is
/// given: the file is a block-store daemon config.
caf::expected<std::optional<node_config>> read_node_config(const std::string& path, std::string_view role_flag);
/// The same from TOML text (tests), `file` naming it in errors.
caf::expected<std::optional<node_config>> parse_node_config(std::string_view text, const std::string& file,
                                                            std::string_view role_flag);

} // namespace kvtier::node
