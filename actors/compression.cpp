// The compression actor: decides, from what steps report, how much of a
// sequence's KV to keep, and tells the block manager to compact it. Policies
// and budgets come from compression/; on the simulated backend their
// footprint (tokens and blocks kept) is what matters, and their quality is
// modeled once on synthetic attention (docs/compression.md).

#include "actors/graph.hpp"
#include "compression/sim_model.hpp"
#include "runtime/config_names.hpp"

#include <caf/all.hpp>

#include <cmath>

namespace kvtier {
namespace {

struct compression_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  compression_state() = default;
  block_manager_actor blocks;
  compression::sim_policy policy;
  static inline const char* name = "compression";
};

using self_ptr = compression_actor::stateful_pointer<compression_state>;

compression_actor::behavior_type compression_fn(self_ptr self, graph_context* ctx, caf::actor blocks) {
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  self->state.blocks = caf::actor_cast<block_manager_actor>(blocks);
  const auto& c = ctx->cfg.compression;
  auto& p = self->state.policy;
  p.policy = std::string(name_of(c.policy));
  p.budget.ratio = c.keep_ratio;
  p.budget.min_tokens = c.min_tokens;
  p.budget.max_tokens = c.max_tokens;
  p.trigger.every_tokens = c.every_tokens;
  auto& m = ctx->metrics->compression;
  if (c.policy != compression_policy::none && c.policy != compression_policy::ratio) {
    if (auto q = compression::modeled_quality(p.policy, c.keep_ratio, compression::small_model())) {
      m.quality_modeled = true;
      m.modeled_output_error = q->out_err;
      m.modeled_mass_kept = q->mass;
      m.modeled_needle_recall = q->needle;
    }
  }
  return {
      [=](stats_atom, const prefill_stats& stats) {
        const auto& cfg = ctx->cfg;
        if (cfg.compression.policy == compression_policy::none)
          return;
        auto fp = compression::compressed_footprint(stats.tokens, self->state.policy, cfg.geometry);
        if (fp.tokens_kept >= stats.tokens)
          return;
        auto& metrics = ctx->metrics->compression;
        ++metrics.runs;
        metrics.tokens_dropped += stats.tokens - fp.tokens_kept;
        self->send(self->state.blocks, compress_atom::value, stats.seq, fp.tokens_kept);
      },
  };
}

} // namespace

compression_actor spawn_compression(caf::actor_system& system, graph_context& context, block_manager_actor blocks) {
  return system.spawn(compression_fn, &context, caf::actor_cast<caf::actor>(blocks));
}

} // namespace kvtier
