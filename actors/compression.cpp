// The compression actor: decides, from what steps report, how much of a
// sequence's KV to keep, and tells the block manager to compact it. The
// policy here is a fixed keep ratio applied at prefill end.

#include "actors/graph.hpp"

#include <caf/all.hpp>

#include <cmath>

namespace kvtier {
namespace {

struct compression_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  compression_state() = default;
  block_manager_actor blocks;
  static inline const char* name = "compression";
};

using self_ptr = compression_actor::stateful_pointer<compression_state>;

compression_actor::behavior_type compression_fn(self_ptr self, graph_context* ctx, caf::actor blocks) {
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  self->state.blocks = caf::actor_cast<block_manager_actor>(blocks);
  return {
    [=](stats_atom, const prefill_stats& stats) {
      const auto& c = ctx->cfg.compression;
      if (c.policy != "ratio" || c.keep_ratio >= 1.0)
        return;
      auto keep = static_cast<uint64_t>(std::ceil(static_cast<double>(stats.tokens) * c.keep_ratio));
      auto& m = ctx->metrics->compression;
      ++m.runs;
      m.tokens_dropped += stats.tokens - keep;
      self->send(self->state.blocks, compress_atom::value, stats.seq, keep);
    },
  };
}

} // namespace

compression_actor spawn_compression(caf::actor_system& system, graph_context& context, block_manager_actor blocks) {
  return system.spawn(compression_fn, &context, caf::actor_cast<caf::actor>(blocks));
}

} // namespace kvtier
