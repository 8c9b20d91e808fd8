// The compression actor: decides, from what steps report, which blocks of a
// sequence's table to drop, and tells the block manager to remove them.
// Budgets come from compression/ (how many tokens to keep); the choice of
// blocks from the attention mass the model measured per block
// (compression/block_selection.hpp): H2O by the mass the prefill's last chunk
// put on each block, accumulated over later passes (every_tokens: each adds
// its query's mass, kept by slot here), SnapKV by the mass of its
// observation window,
// StreamingLLM by position alone. A backend that measures nothing (the
// simulator's roofline, the CUDA twin) sends the same message with no mass:
// then the choice falls back to recency. A run with a model reports the mass
// kept as measured; others the quality modeled once on synthetic attention
// (docs/compression.md).

#include "actors/graph.hpp"
#include "compression/block_selection.hpp"
#include "compression/sim_model.hpp"
#include "runtime/config_names.hpp"

#include <caf/all.hpp>

#include <cmath>
#include <deque>
#include <unordered_map>

namespace kvtier {
namespace {

/// H2O's accumulated score of each kept block, by HBM slot (a slot names
/// the block as long as a sequence holds it).
using slot_scores = std::unordered_map<uint32_t, double>;

struct compression_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  compression_state() = default;
  block_manager_actor blocks;
  compression::sim_policy policy;
  // H2O's rolling form (every_tokens): each sequence's accumulated scores,
  // the most recently reported sequences only (no message says when one ends).
  std::unordered_map<uint64_t, slot_scores> accumulated;
  std::deque<uint64_t> accumulated_order;
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

struct decision {
  compress_order order;
  slot_scores kept; // the h2o family with a measured mass: what the next pass adds to
};

/// The blocks to drop for one report (an order with no indices when the
/// budget holds the table), given what earlier passes accumulated.
decision decide(const prefill_stats& stats, const compression::sim_policy& policy, const config& cfg,
                const slot_scores* earlier) {
  decision d;
  auto& order = d.order;
  order.seq = stats.seq;
  const uint64_t kv = stats.tokens - std::min(stats.dropped_tokens, stats.tokens);
  // The budget is a share of the sequence's length, so repeated passes keep
  // it there rather than shrinking what was kept again.
  auto fp = compression::compressed_footprint(stats.tokens, policy, cfg.geometry);
  compression::block_choice c;
  c.policy = policy.policy;
  c.kv_tokens = kv;
  c.block_tokens = cfg.cache.block_tokens;
  c.keep_tokens = fp.tokens_kept;
  c.mass = stats.block_mass;
  c.mass_queries = stats.mass_queries;
  c.seed = stats.seq;
  const size_t blocks = (kv + c.block_tokens - 1) / c.block_tokens;
  const bool by_slot = stats.slots.size() == blocks;
  std::vector<double> prior;
  if (earlier && by_slot) {
    prior.resize(blocks, 0.0);
    for (size_t i = 0; i < blocks; ++i)
      if (auto it = earlier->find(stats.slots[i]); it != earlier->end())
        prior[i] = it->second;
    c.earlier = prior;
  }
  if (fp.tokens_kept < kv)
    order.indices = compression::blocks_to_drop(c);
  if (by_slot)
    for (auto i : order.indices)
      order.slots.push_back(stats.slots[i]);
  if (!stats.last_block_mass.empty())
    order.mass_kept = static_cast<float>(compression::mass_kept(stats.last_block_mass, order.indices));
  if (by_slot && stats.block_mass.size() == blocks && compression::accumulates(c.policy)) {
    auto scores = compression::block_scores(c);
    size_t next = 0;
    for (size_t i = 0; i < blocks; ++i) {
      if (next < order.indices.size() && order.indices[next] == i) {
        ++next;
        continue;
      }
      d.kept[stats.slots[i]] = scores[i];
    }
  }
  return d;
}

compression_actor::behavior_type compression_fn(self_ptr self, graph_context* ctx, caf::actor blocks) {
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  self->state.blocks = caf::actor_cast<block_manager_actor>(blocks);
  const auto& c = ctx->cfg.compression;
  auto& p = self->state.policy;
  p = policy_of(ctx->cfg);
  auto& m = ctx->metrics->compression;
  // A model measures its own attention (the report's measured quality);
  // elsewhere the policy's quality is modeled once on synthetic attention.
  const bool measured = ctx->io->compute().needs().model_inputs;
  if (!measured && c.policy != compression_policy::none && c.policy != compression_policy::ratio) {
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
        auto& st = self->state;
        const bool rolling = ctx->cfg.compression.every_tokens > 0 && compression::accumulates(st.policy.policy);
        auto known = st.accumulated.find(stats.seq);
        auto d = decide(stats, st.policy, ctx->cfg, known == st.accumulated.end() ? nullptr : &known->second);
        if (rolling && !d.kept.empty()) {
          if (known == st.accumulated.end())
            st.accumulated_order.push_back(stats.seq);
          st.accumulated[stats.seq] = std::move(d.kept);
          // Sequences that finished are never reported again: keep a bounded window.
          const size_t cap = 4 * size_t{ctx->cfg.scheduler.max_running};
          while (st.accumulated_order.size() > cap) {
            st.accumulated.erase(st.accumulated_order.front());
            st.accumulated_order.pop_front();
          }
        }
        // Sent even when nothing goes: the block manager's answer releases
        // the sequence, which waits for it before its next step.
        self->send(st.blocks, compress_atom::value, std::move(d.order));
      },
  };
}

} // namespace

compress_order choose_compaction(const prefill_stats& stats, const config& cfg) {
  return decide(stats, policy_of(cfg), cfg, nullptr).order;
}

compression_actor spawn_compression(caf::actor_system& system, graph_context& context, block_manager_actor blocks) {
  return system.spawn(compression_fn, &context, caf::actor_cast<caf::actor>(blocks));
}

} // namespace kvtier
