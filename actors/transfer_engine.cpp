// The transfer_engine actor: owns every link. Block moves arrive in batches
// (one per link per plan); each becomes one backend submission, so thousands
// of blocks cost one message and one completion.

#include "actors/graph.hpp"

#include "runtime/check.hpp"

#include <caf/all.hpp>

#include <unordered_map>

namespace kvtier {
namespace {

struct transfer_engine_state {
  // Not an aggregate: CAF would otherwise try to build the state from the actor pointer.
  transfer_engine_state() = default;
  std::unordered_map<uint64_t, block_manager_actor> waiting; // tag -> who asked
  static inline const char* name = "transfer_engine";
};

using self_ptr = transfer_engine_actor::stateful_pointer<transfer_engine_state>;

transfer_engine_actor::behavior_type transfer_engine_fn(self_ptr self, graph_context* ctx) {
  return {
      [=](move_atom, transfer_batch& batch) {
        auto requester = caf::actor_cast<block_manager_actor>(self->current_sender());
        self->state.waiting.emplace(batch.tag, requester);
        auto notify = caf::actor_cast<caf::actor>(self);
        bool nvme = batch.from == tier::nvme || batch.to == tier::nvme;
        if (!nvme) {
          ctx->io->copies().submit(copy_job{batch.from, batch.to, std::move(batch.moves), batch.tag, batch.background},
                                   notify);
          return;
        }
        auto* pages = ctx->io->pages();
        KVTIER_CHECK(pages != nullptr, "transfer_engine: an NVMe move without a page store");
        page_job job;
        job.op = batch.to == tier::nvme ? page_op::write : page_op::read;
        job.tag = batch.tag;
        job.pages.reserve(batch.moves.size());
        for (size_t i = 0; i < batch.moves.size(); ++i) {
          const auto& m = batch.moves[i];
          if (job.op == page_op::write)
            job.pages.push_back({m.from_slot, m.to_slot, batch.hashes[i], 0});
          else
            job.pages.push_back({m.to_slot, m.from_slot, batch.hashes[i], 0});
        }
        pages->submit(std::move(job), notify);
      },
      [=](completion_atom, uint64_t tag, uint64_t, caf::error& status) {
        auto it = self->state.waiting.find(tag);
        KVTIER_CHECK(it != self->state.waiting.end(), "transfer_engine: completion for an unknown tag");
        self->send(it->second, moved_atom::value, tag, !status);
        self->state.waiting.erase(it);
      },
  };
}

} // namespace

transfer_engine_actor spawn_transfer_engine(caf::actor_system& system, graph_context& context) {
  return system.spawn(transfer_engine_fn, &context);
}

} // namespace kvtier
