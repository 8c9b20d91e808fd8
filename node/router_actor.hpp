#pragma once
// The router: knows the cluster's nodes (its [[member]] list), assigns each
// request a prefill node and then a decode node, and tracks which nodes live.
//
// Liveness: the router connects to every member through the middleman and
// monitors it; a member is live from its connection until its down message
// (a killed process: as its TCP connection closes; a hung one: when no BASP
// heartbeat came for connection_timeout_ms), and is dialled again every
// 200 ms while down. Nothing is sent to a member that is not live.
//
// Assignment: prefill nodes round robin, decode nodes by fewest requests in
// flight (ties: the order of the list). A request is refused before its
// prefill when no decode node lives. A decode node that goes down (or fails
// with a transport error) hands its requests to another live decode node,
// which pulls the prompt's blocks from the remote store; a node's own
// refusal (a kvtier error) goes back to the client as it is.
//
// Invariants: every submitted request is answered exactly once; answers
// from an attempt the router gave up on are ignored.

#include "node/node_config.hpp"
#include "node/node_messages.hpp"

#include <caf/behavior.hpp>
#include <caf/event_based_actor.hpp>

namespace kvtier::node {

caf::behavior router_actor(caf::event_based_actor* self, node_config config);

} // namespace kvtier::node
