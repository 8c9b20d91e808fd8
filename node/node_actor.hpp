#pragma once
// A cluster node's actor: prefills requests into the shared remote store
// and decodes requests from it, on the stand-in compute (standin_compute.hpp).
//
// Prefill: block by block, each block's KV is computed into the node's own
// tier and its write to the remote store submitted at once, so blocks stream
// to the store while later ones are computed; the answer comes when every
// write is acknowledged. Decode: the prompt's chain is looked up in the own
// tier, what it lacks is pulled from the remote store in one pipelined read
// (every value checksummed by remote/), a block the store lacks too is
// recomputed and counted; then decode steps run at the modeled rate.
//
// Invariants: a request's slots stay referenced until it is answered; every
// remote completion is handled on the actor (the store's thread only sends
// a message); counters only grow.

#include "node/local_tier.hpp"
#include "node/node_config.hpp"
#include "node/node_messages.hpp"

#include <caf/behavior.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/expected.hpp>

#include <memory>

namespace kvtier::remote {
class redis_block_store;
}

namespace kvtier::node {

/// What a node actor owns: its config, tier, remote store and counters.
struct node_core {
  node_config config;
  local_tier tier;
  std::unique_ptr<remote::redis_block_store> store;
  node_stats stats;

  node_core(node_config c, local_tier t, std::unique_ptr<remote::redis_block_store> s);
  ~node_core();
};

/// Builds the tier and connects to the remote store: a node that cannot
/// reach its store refuses to start.
caf::expected<std::shared_ptr<node_core>> open_node(const node_config& config);

caf::behavior node_actor(caf::event_based_actor* self, std::shared_ptr<node_core> core);

} // namespace kvtier::node
