// The scheduler actor: a thin behavior over scheduler_state. It owns the
// iteration loop: plan -> grant -> step on the compute port -> step done.

#include "actors/graph.hpp"
#include "actors/scheduler_state.hpp"

#include <caf/all.hpp>

#include <optional>
#include <utility>

namespace kvtier {
namespace {

struct scheduler_actor_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  scheduler_actor_state() = default;
  std::unique_ptr<scheduler_state> logic;
  block_manager_actor blocks;
  compression_actor compression;
  std::optional<step_output> sampled; // the outstanding step's tokens, once the model sent them
  static inline const char* name = "scheduler";
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_actor_state>;

void kick(self_ptr self) {
  auto& logic = *self->state.logic;
  if (auto ops = logic.build_plan())
    self->send(self->state.blocks, plan_atom::value, std::move(*ops));
  else if (!logic.step_outstanding())
    logic.note_idle();
}

scheduler_actor::behavior_type scheduler_fn(self_ptr self, graph_context* ctx, caf::actor blocks,
                                            caf::actor compression) {
  auto& st = self->state;
  auto options = scheduler_options_from(ctx->cfg);
  options.record_steps = ctx->metrics->record_steps;
  auto needs = ctx->io->compute().needs();
  options.model_inputs = needs.model_inputs;
  options.keeps_tables = needs.keeps_tables;
  options.vocab_size = needs.vocab_size;
  st.logic = std::make_unique<scheduler_state>(options, *ctx->costs, &ctx->metrics->scheduler, &ctx->metrics->steps);
  // Peers arrive untyped: CAF 0.17 cannot bind typed handles as spawn arguments.
  st.blocks = caf::actor_cast<block_manager_actor>(blocks);
  st.compression = caf::actor_cast<compression_actor>(compression);
  auto now = [=] { return seconds_since(*ctx, self->clock().now()); };
  return {
      [=](arrive_atom, request_spec& spec) {
        auto rejected = ctx->metrics->scheduler.requests_rejected;
        self->state.logic->on_arrival(std::move(spec), now());
        if (ctx->metrics->scheduler.requests_rejected != rejected)
          ++ctx->settled;
        kick(self);
      },
      [=](plan_atom, step_grant& grant) {
        auto released = self->state.logic->released();
        auto plan = self->state.logic->on_grant(grant, now());
        ctx->settled += self->state.logic->released() - released; // blocks back: the request is settled
        const auto step_id = plan.step_id;
        if (!plan.sequences.empty())
          ctx->io->compute().execute(std::move(plan), caf::actor_cast<caf::actor>(self), step_id);
        else if (self->state.logic->progress())
          kick(self);
        else
          self->state.logic->note_idle();
      },
      [=](sampled_atom, step_output& out) { self->state.sampled = std::move(out); },
      [=](completion_atom, uint64_t, uint64_t step_ns, caf::error&) {
        auto sampled = std::exchange(self->state.sampled, std::nullopt);
        auto prefilled = self->state.logic->on_step_done(now(), static_cast<double>(step_ns) * 1e-9,
                                                         sampled ? &sampled->sequences : nullptr);
        for (auto& p : prefilled)
          self->send(self->state.compression, stats_atom::value, p);
        for (const auto& c : self->state.logic->take_completed())
          if (ctx->on_complete)
            ctx->on_complete(c.id, c.first_token_s, c.done_s);
        kick(self);
      },
      [=](ready_atom, uint64_t seq, uint64_t tokens) {
        self->state.logic->on_ready(seq, tokens);
        kick(self);
      },
      [=](compacted_atom, uint64_t seq, uint64_t dropped) {
        self->state.logic->on_compacted(seq, dropped);
        kick(self);
      },
  };
}

} // namespace

scheduler_actor spawn_scheduler(caf::actor_system& system, graph_context& context, block_manager_actor blocks,
                                compression_actor compression) {
  return system.spawn(scheduler_fn, &context, caf::actor_cast<caf::actor>(blocks),
                      caf::actor_cast<caf::actor>(compression));
}

} // namespace kvtier
