#pragma once
// kvtierd's cluster roles: runs a prefill, decode or both node, or the
// router, publishing its actor through CAF's middleman on loopback, until
// SIGTERM or SIGINT. Includes no CAF, so kvtierd's main stays Asio-only.

#include "node/node_config.hpp"

namespace kvtier::node {

/// Exit status: 0 after a clean stop, 1 when the port, the remote store or
/// the middleman refuse.
int run_node(const node_config& config);

} // namespace kvtier::node
