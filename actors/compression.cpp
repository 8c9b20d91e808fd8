// The compression actor: decides, from what steps report, which blocks of a
// sequence's table to drop, and tells the block manager to remove them.
// Budgets come from compression/ (how many tokens to keep); the choice of
// blocks from the attention mass the model measured per block
// (compression/block_selection.hpp): H2O by the mass the prefill's last chunk
// put on each block, SnapKV by the mass of its observation window,
// StreamingLLM by position alone. A backend that measures nothing (the
// simulator's roofline, the CUDA twin) sends the same message with no mass:
// then the choice falls back to recency, and the run's quality is the one
// modeled once on synthetic attention (docs/compression.md).

#include "actors/graph.hpp"
#include "compression/block_selection.hpp"
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

compression::sim_policy policy_of(const config& cfg) {
  const auto& c = cfg.compression;
  compression::sim_policy p;
  p.policy = std::string(name_of(c.policy));
  p.budget.ratio = c.keep_ratio;
  p.budget.min_tokens = c.min_tokens;
  p.budget.max_tokens = c.max_tokens;
  p.trigger.every_tokens = c.every_tokens;
  return p;
}

/// The blocks to drop for one report, or an order with no indices.
compress_order decide(const prefill_stats& stats, const compression::sim_policy& policy, const config& cfg) {
  compress_order order;
  order.seq = stats.seq;
  const uint64_t kv = stats.tokens - std::min(stats.dropped_tokens, stats.tokens);
  // The budget is a share of the sequence's length, so repeated passes keep
  // it there rather than shrinking what was kept again.
  auto fp = compression::compressed_footprint(stats.tokens, policy, cfg.geometry);
  if (fp.tokens_kept >= kv)
    return order;
  compression::block_choice c;
  c.policy = policy.policy;
  c.kv_tokens = kv;
  c.block_tokens = cfg.cache.block_tokens;
  c.keep_tokens = fp.tokens_kept;
  c.mass = stats.block_mass;
  c.mass_queries = stats.mass_queries;
  c.seed = stats.seq;
  order.indices = compression::blocks_to_drop(c);
  if (stats.slots.size() == (kv + c.block_tokens - 1) / c.block_tokens)
    for (auto i : order.indices)
      order.slots.push_back(stats.slots[i]);
  if (!stats.last_block_mass.empty())
    order.mass_kept = static_cast<float>(compression::mass_kept(stats.last_block_mass, order.indices));
  return order;
}

compression_actor::behavior_type compression_fn(self_ptr self, graph_context* ctx, caf::actor blocks) {
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  self->state.blocks = caf::actor_cast<block_manager_actor>(blocks);
  const auto& c = ctx->cfg.compression;
  auto& p = self->state.policy;
  p = policy_of(ctx->cfg);
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
        if (ctx->cfg.compression.policy == compression_policy::none)
          return;
        // Sent even when nothing goes: the block manager's answer releases
        // the sequence, which waits for it before its next step.
        self->send(self->state.blocks, compress_atom::value, decide(stats, self->state.policy, ctx->cfg));
      },
  };
}

} // namespace

compress_order choose_compaction(const prefill_stats& stats, const config& cfg) {
  return decide(stats, policy_of(cfg), cfg);
}

compression_actor spawn_compression(caf::actor_system& system, graph_context& context, block_manager_actor blocks) {
  return system.spawn(compression_fn, &context, caf::actor_cast<caf::actor>(blocks));
}

} // namespace kvtier
