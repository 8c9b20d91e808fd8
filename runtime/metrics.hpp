#pragma once
// Counters a user can act on, one struct per owner. Each actor writes only its
// own section, from its own thread; a run's report reads them only after every
// actor has stopped (simulated and real runs alike), so no field needs to be
// atomic. The links' counters are not here: backends keep them
// (link_counters, runtime/backend.hpp) and a run copies them into its result.

#include "runtime/tier.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kvtier {

struct tier_metrics {
  uint64_t capacity_blocks = 0;
  uint64_t peak_used_blocks = 0;    // slots referenced at once (by sequences or moves)
  uint64_t peak_cached_blocks = 0;  // slots holding a block at once, referenced or cached on the free queue
  uint64_t prefix_hit_blocks = 0;   // blocks of admitted prompts found in this tier (first tier that had them)
  uint64_t evictions = 0;           // cached blocks whose slot was reused
  uint64_t evictions_lost = 0;      // ... of which no other tier held a copy: the block is gone
  uint64_t demotions = 0;           // blocks copied down ahead of need
  uint64_t promotions = 0;          // blocks copied up for a request
  uint64_t copies_dropped = 0;      // exclusive: copies freed here because the block is in use above
  uint64_t allocation_failures = 0; // "no room" answers
  uint64_t allocated = 0;           // slots taken off the free queue (fresh or revived)
  uint64_t freed = 0;               // slots returned to it; at rest allocated == freed + in use
};

/// The batches the block manager handed to one link, by runs: a run is
/// consecutive moves of a batch whose slots in the link's lower tier ascend
/// one by one, which the copy engine moves as one DMA (kernels/copy's
/// dram_runs) and which are adjacent slots of the NVMe slot file.
struct link_runs {
  uint64_t batches = 0;
  uint64_t blocks = 0;
  uint64_t runs = 0;
  uint64_t demotion_batches = 0; // batches of demote-ahead moves only (transfer_batch::background)
  uint64_t demotion_blocks = 0;
  uint64_t demotion_runs = 0;
};

struct batch_runs {
  link_runs pcie_h2d, pcie_d2h, nvme_read, nvme_write;
};

struct block_metrics {
  std::array<tier_metrics, tier_count> tiers{};
  batch_runs runs;            // per link, the runs its batches came in
  uint64_t prompt_blocks = 0; // cacheable prompt blocks looked up at admission
  uint64_t miss_blocks = 0;   // ... found in no tier
  uint64_t swapped_out_blocks = 0;
  uint64_t swapped_in_blocks = 0;
  uint64_t spilled_blocks = 0;  // cold blocks of sequences larger than HBM moved to DRAM to stream from there
  uint64_t corrupted_reads = 0; // pages that failed their checksum: treated as misses
  uint64_t failed_transfers = 0;
  uint64_t reads_while_moving = 0;    // must stay 0: the block state machine forbids it
  uint64_t nvme_recovered_blocks = 0; // found in the NVMe tier at start, left by an earlier run, adopted
  // Unused token slots in the partially filled last blocks of resident
  // sequences (internal fragmentation), sampled at every plan.
  uint64_t fragmentation_peak_tokens = 0;
  double fragmentation_sum_tokens = 0;
  double fragmentation_sum_used_tokens = 0; // block_tokens x HBM blocks in use, summed over the same samples
  uint64_t fragmentation_samples = 0;
};

/// What a model generated for one request (runs whose compute port reads
/// model inputs): the sampled tokens and each one's logit.
struct generated_text {
  std::vector<uint32_t> tokens;
  std::vector<float> logits;
};

struct scheduler_metrics {
  uint64_t requests_arrived = 0;
  uint64_t requests_completed = 0;
  uint64_t requests_rejected = 0;      // could never fit in HBM (streaming: in HBM and DRAM)
  std::vector<std::string> rejections; // why, for the first few (request id and sizes)
  uint64_t steps = 0;
  uint64_t prefill_tokens = 0; // tokens computed in prefill (hits excluded)
  uint64_t decode_tokens = 0;
  uint64_t preemptions_swap = 0;
  uint64_t preemptions_recompute = 0;
  uint64_t recomputed_tokens = 0;
  // Streaming: per step, each sequence's blocks read from DRAM (summed), and
  // the steps that read any.
  uint64_t streamed_blocks = 0;
  uint64_t streamed_steps = 0;
  uint64_t supplied_tokens = 0; // prompt tokens taken from KV that came with the request (request_spec)
  uint64_t supplied_blocks = 0; // ... the blocks they filled
  double busy_seconds = 0;      // time the GPU spent in steps
  std::vector<double> ttft_s;   // per completed request
  std::vector<double> tpot_s;
  std::vector<double> e2e_s;
  std::vector<double> queue_s; // arrival to first scheduled step
  // Where unfinished requests stood when the scheduler last went idle.
  uint32_t idle_waiting = 0, idle_loading = 0, idle_running = 0, idle_swapped = 0;
  uint64_t batch_size_sum = 0;
  uint32_t max_batch_size = 0;
  std::map<uint64_t, generated_text> generated; // by request id; empty without a model
};

struct compression_metrics {
  uint64_t runs = 0;           // passes that chose blocks to drop
  uint64_t tokens_dropped = 0; // KV tokens those passes removed
  uint64_t blocks_dropped = 0; // table blocks removed (every one a policy decision)
  uint64_t blocks_freed = 0;   // ... whose slot no other sequence held: back to the free queue at once
  uint64_t stale_orders = 0;   // decisions that found the sequence gone, moved or its table changed
  // Measured on a model's own attention (where the compute port reports it):
  // the share of the last prefill query's attention mass, summed over layers
  // and heads, that the kept blocks held; summed over the passes that had it.
  double measured_mass_kept_sum = 0;
  uint64_t measured_mass_runs = 0;
  // The policy's modeled quality at its keep ratio (synthetic attention; docs/compression.md).
  bool quality_modeled = false;
  double modeled_output_error = 0;
  double modeled_mass_kept = 0;
  double modeled_needle_recall = 0;
};

/// One step's sample for the optional CSV time series.
struct step_sample {
  double time_s;
  uint32_t batch;
  uint32_t prefill_tokens;
  uint32_t decode_tokens;
  uint32_t waiting;
  uint32_t hbm_used;
  uint32_t dram_used;
  double step_s;
};

struct run_metrics {
  block_metrics blocks;
  scheduler_metrics scheduler;
  compression_metrics compression;
  std::vector<step_sample> steps; // filled when a time series was asked for
  bool record_steps = false;
};

} // namespace kvtier
