#include "actors/graph.hpp"

#include <caf/all.hpp>

namespace kvtier {

double seconds_since(const graph_context& context, caf::actor_clock::time_point now) {
  return std::chrono::duration<double>(now - context.epoch).count();
}

actor_graph spawn_graph(caf::actor_system& system, graph_context& context) {
  actor_graph g;
  g.transfers = spawn_transfer_engine(system, context);
  g.blocks = spawn_block_manager(system, context, g.transfers);
  g.compression = spawn_compression(system, context, g.blocks);
  g.scheduler = spawn_scheduler(system, context, g.blocks, g.compression);
  caf::anon_send(g.blocks, attach_atom::value, g.scheduler);
  return g;
}

} // namespace kvtier
