#pragma once
// Builds kvtier's actor graph over a backend: scheduler, block manager,
// transfer engine and compression, wired to each other. The same graph runs
// on the real and the simulated backend; only `backend` differs.

#include "actors/messages.hpp"
#include "actors/seam.hpp"
#include "runtime/config.hpp"
#include "runtime/cost_model.hpp"
#include "runtime/metrics.hpp"

#include <caf/actor_system.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>

namespace kvtier {

struct actor_graph {
  scheduler_actor scheduler;
  block_manager_actor blocks;
  transfer_engine_actor transfers;
  compression_actor compression;
};

/// Everything the actors share read-only or write into: lives as long as the graph.
struct graph_context {
  config cfg;
  std::unique_ptr<cost_model> costs;
  backend* io = nullptr;              // not owned
  run_metrics* metrics = nullptr;     // not owned; each actor writes its own section
  caf::actor_clock::time_point epoch; // time zero of the run
  std::atomic<uint64_t> settled{0};   // requests rejected, or completed and released (read by a waiting driver)
  std::atomic<uint64_t> moving{0};    // transfer batches in flight (read by a waiting driver)
  /// Called by the scheduler, on its thread, for each request that produced
  /// its last token: (request id, first token's time, completion time) in
  /// seconds since the epoch. May be empty.
  std::function<void(uint64_t, double, double)> on_complete;
};

actor_graph spawn_graph(caf::actor_system& system, graph_context& context);

// Individual actors, for tests that wire their own graph.
block_manager_actor spawn_block_manager(caf::actor_system& system, graph_context& context,
                                        transfer_engine_actor transfers);
transfer_engine_actor spawn_transfer_engine(caf::actor_system& system, graph_context& context);
scheduler_actor spawn_scheduler(caf::actor_system& system, graph_context& context, block_manager_actor blocks,
                                compression_actor compression);
compression_actor spawn_compression(caf::actor_system& system, graph_context& context, block_manager_actor blocks);
/// The compression actor's decision for one report under `cfg`'s policy and
/// budget: the table blocks to drop (none when the budget holds the table).
compress_order choose_compaction(const prefill_stats& stats, const config& cfg);

/// Seconds since the run's epoch on the actor clock (virtual in simulation).
double seconds_since(const graph_context& context, caf::actor_clock::time_point now);

} // namespace kvtier
