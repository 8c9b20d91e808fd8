// The block_manager actor: a thin behavior over block_manager_state.

#include "actors/block_manager_state.hpp"
#include "actors/graph.hpp"

#include <caf/all.hpp>

namespace kvtier {
namespace {

struct block_manager_actor_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  block_manager_actor_state() = default;
  std::unique_ptr<block_manager_state> blocks;
  bool model_inputs = false; // the compute port reads block tables
  transfer_engine_actor transfers;
  scheduler_actor scheduler;
  static inline const char* name = "block_manager";
};

using self_ptr = block_manager_actor::stateful_pointer<block_manager_actor_state>;

void flush_transfers(self_ptr self, graph_context* ctx) {
  for (auto& batch : self->state.blocks->take_transfers())
    self->send(self->state.transfers, move_atom::value, std::move(batch));
  ctx->moving.store(self->state.blocks->transfers_in_flight_count());
}

/// A model reads the table of every sequence that may step (what changed
/// of it since the last result: the scheduler keeps the rest), and the
/// copy-on-write copies its grow made; any compute port, what it streams.
void attach_step_inputs(block_manager_state& st, op_result& r, bool model_inputs) {
  if (r.status != admit_status::ready)
    return;
  r.streamed_blocks = st.streamed_blocks(r.seq);
  if (!model_inputs)
    return;
  auto update = st.take_table_update(r.seq);
  r.table_from = update.from;
  r.table = std::move(update.entries);
  r.copies = st.take_copies();
}

op_result apply(block_manager_state& st, sequence_op& op, bool model_inputs) {
  op_result r;
  r.seq = op.seq;
  switch (op.what) {
    case sequence_op::kind::release:
      st.release(op.seq);
      break;
    case sequence_op::kind::preempt:
      r.tokens = st.tokens(op.seq);
      r.mode = st.preempt(op.seq, op.mode);
      break;
    case sequence_op::kind::grow:
      r.status = st.extend(op.seq, op.tokens);
      r.dropped_tokens = st.dropped_tokens(op.seq);
      attach_step_inputs(st, r, model_inputs);
      break;
    case sequence_op::kind::swap_in:
      r.status = st.swap_in(op.seq);
      r.tokens = st.tokens(op.seq);
      break;
    case sequence_op::kind::admit: {
      auto a = st.admit(op.seq, std::move(op.chain), op.prompt_tokens);
      r.status = a.status;
      r.tokens = a.hit_tokens;
      r.hits_by_tier = a.hits_by_tier;
      if (a.status != admit_status::ready)
        break;
      uint64_t left = op.target_tokens > a.hit_tokens ? op.target_tokens - a.hit_tokens : 0;
      auto grow = static_cast<uint32_t>(std::min<uint64_t>(op.tokens, left));
      if (grow > 0) {
        r.status = st.extend(op.seq, grow);
        if (r.status == admit_status::no_room) {
          // Admission only when blocks can be had: undo it.
          st.release(op.seq);
          st.take_copies(); // none were made: the grow failed whole
        }
      }
      attach_step_inputs(st, r, model_inputs);
      break;
    }
  }
  return r;
}

block_manager_actor::behavior_type block_manager_fn(self_ptr self, graph_context* ctx, caf::actor transfers) {
  auto options = block_manager_options_from(ctx->cfg);
  self->state.blocks = std::make_unique<block_manager_state>(options, &ctx->metrics->blocks);
  self->state.model_inputs = ctx->io->compute().needs().model_inputs;
  // What a persistent NVMe tier kept from an earlier run is cached, not lost.
  if (auto* pages = ctx->io->pages()) {
    auto recovered = pages->recovered_blocks();
    ctx->metrics->blocks.nvme_recovered_blocks += self->state.blocks->adopt_nvme_blocks(recovered);
  }
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  self->state.transfers = caf::actor_cast<transfer_engine_actor>(transfers);
  return {
      [=](plan_atom, step_ops& ops) {
        auto& st = *self->state.blocks;
        step_grant grant;
        grant.step = ops.step;
        grant.results.reserve(ops.ops.size());
        for (auto& op : ops.ops)
          grant.results.push_back(apply(st, op, self->state.model_inputs));
        st.demote_ahead();
        flush_transfers(self, ctx);
        grant.hbm_free = st.free_blocks(tier::hbm);
        grant.hbm_used = st.pool(tier::hbm).used_count();
        grant.dram_used = ctx->cfg.dram_blocks() ? st.pool(tier::dram).used_count() : 0;
        auto& b = ctx->metrics->blocks;
        auto unused = st.fragmentation_tokens();
        b.fragmentation_peak_tokens = std::max(b.fragmentation_peak_tokens, unused);
        b.fragmentation_sum_tokens += static_cast<double>(unused);
        b.fragmentation_sum_used_tokens += static_cast<double>(grant.hbm_used) * ctx->cfg.cache.block_tokens;
        ++b.fragmentation_samples;
        self->send(self->state.scheduler, plan_atom::value, std::move(grant));
      },
      [=](moved_atom, uint64_t tag, bool ok) {
        auto& st = *self->state.blocks;
        for (auto seq : st.on_transfer_done(tag, ok))
          self->send(self->state.scheduler, ready_atom::value, seq, st.tokens(seq));
        // Demotions stream: a landed batch makes room for the next. A failed one
        // waits for the next plan: a lower tier that refuses writes (a dead
        // remote server) must not be retried in a loop.
        if (ok)
          st.demote_ahead();
        flush_transfers(self, ctx);
      },
      [=](compress_atom, const compress_order& order) {
        auto& st = *self->state.blocks;
        auto& m = ctx->metrics->compression;
        // Every order is answered (the scheduler holds the sequence until then).
        auto answer = [&] {
          self->send(self->state.scheduler, compacted_atom::value, order.seq,
                     st.registered(order.seq) ? st.dropped_tokens(order.seq) : uint64_t{0});
        };
        if (order.indices.empty())
          return answer();
        if (!st.registered(order.seq) || st.swapped(order.seq) || !st.ready(order.seq)) {
          ++m.stale_orders; // finished or moved meanwhile: nothing to compact
          return answer();
        }
        auto done = st.compact(order.seq, order.indices, order.slots);
        if (!done.applied) {
          ++m.stale_orders;
          return answer();
        }
        ++m.runs;
        m.blocks_dropped += done.dropped.size();
        m.tokens_dropped += uint64_t{st.block_tokens()} * done.dropped.size();
        m.blocks_freed += done.freed.size();
        if (order.mass_kept >= 0) {
          m.measured_mass_kept_sum += order.mass_kept;
          ++m.measured_mass_runs;
        }
        answer();
      },
      [=](attach_atom, scheduler_actor scheduler) { self->state.scheduler = std::move(scheduler); },
  };
}

} // namespace

block_manager_actor spawn_block_manager(caf::actor_system& system, graph_context& context,
                                        transfer_engine_actor transfers) {
  return system.spawn(block_manager_fn, &context, caf::actor_cast<caf::actor>(transfers));
}

} // namespace kvtier
