#pragma once
// The vocabulary of the backend seam (actors/seam.hpp) as plain values: the
// jobs the actors submit (copies between HBM and DRAM, pages between DRAM and
// NVMe, model steps) and the counters a backend keeps per link. No actor
// handles here: the engines of kernels/ and io/ speak this vocabulary without
// knowing who sent the job.
//
// The caller pins every slot named in a job (block state `moving`) from
// submit until its completion arrives; backends may touch those slots only.

#include "runtime/block_hash.hpp"
#include "runtime/tier.hpp"
#include "runtime/tier_layout.hpp"

#include <cstdint>
#include <vector>

namespace kvtier {

// -- copies between HBM and DRAM ---------------------------------------------

struct slot_move {
  uint32_t from_slot;
  uint32_t to_slot;
};

struct copy_job {
  tier from = tier::hbm;
  tier to = tier::dram;
  std::vector<slot_move> moves;
  uint64_t tag = 0;
  /// Nothing waits on it (demote-ahead): it runs beside the model's compute,
  /// so the engine takes a path that leaves the SMs alone, even if slower.
  bool background = false;
};

/// Cumulative counters of one link direction, for metrics.
struct link_counters {
  uint64_t bytes = 0;
  uint64_t operations = 0;
  double busy_seconds = 0; // time with a transfer in flight, issue to completion
  /// PCIe with quantize-on-offload: the moved blocks' size in HBM's own
  /// format (more than `bytes`); 0 where it equals `bytes`.
  uint64_t kv_bytes = 0;
  /// Time the link itself moved bytes, where the backend measures it apart
  /// from busy_seconds (the GPU's timing events); 0: not measured apart.
  double link_seconds = 0;
  /// Where the host's span exceeds the link's, summed over `requests` (the
  /// GPU mover's link_stats; 0 where not measured): the issue thread's own
  /// calls, pickup to the first operation starting, the last one ending to
  /// the completion being seen.
  uint64_t requests = 0;
  double issue_seconds = 0;
  double start_lag_seconds = 0;
  double end_lag_seconds = 0;
};

// -- pages between DRAM and NVMe -----------------------------------------------

enum class page_op : uint8_t { write, read };

struct page_transfer {
  uint32_t dram_slot;
  uint32_t nvme_slot;
  block_hash hash; // written into the page header; checked on read
  uint64_t salt_id = 0;
};

struct page_job {
  page_op op = page_op::write;
  std::vector<page_transfer> pages;
  uint64_t tag = 0;
};

// -- model compute -----------------------------------------------------------

/// A copy-on-write copy the compute port applies before the step writes:
/// the first `tokens` tokens of HBM slot `from_slot` into `to_slot`, every
/// layer, K and V.
struct slot_copy {
  uint32_t from_slot;
  uint32_t to_slot;
  uint32_t tokens;
};

/// A block-table entry with this bit set names a slot of the DRAM pool, not
/// of HBM: a streamed block, read in place (docs/model.md, "Tiered
/// PagedAttention"). Equal to kernels/model's paged_kv_pool::dram_bit.
inline constexpr uint32_t streamed_slot_bit = 0x8000'0000u;

/// One sequence of a step. streamed_blocks is always filled: the leading
/// logical blocks the step reads from DRAM (a roofline charges their bytes to
/// PCIe). The fields after it are filled only when the compute port reads
/// them (a model, not a roofline): then
///  - tokens.size() == new_tokens, at positions first_position + i;
///  - compression may have dropped whole blocks of positions below
///    context_tokens from the table (dropped_tokens of them): position
///    p >= first_position is table entry p - dropped_tokens, and the table
///    holds context_tokens - dropped_tokens entries before the step;
///  - the sequence's table names the slot of every table entry up to
///    first_position + new_tokens - dropped_tokens: its first streamed_blocks
///    entries DRAM slots with streamed_slot_bit, the rest HBM slots (the HBM
///    pool is layer-major, the DRAM pool block-major: tier_layout.hpp); a
///    sequence that streams is never compacted while it does;
///  - the step carries only the table's entries from table_from on, in
///    block_table: entries [0, table_from) are those the port already holds
///    for this sequence from its earlier steps, unchanged (a port that keeps
///    tables, compute_needs::keeps_tables; for any other port table_from is
///    0 and block_table the whole table). Tables only grow at the end, so a
///    decode step carries no entry, or the one it appended; a copy-on-write
///    tail, a compaction, a streamed prefix or a swap-in carries the table
///    again from the first entry that changed;
///  - the K/V of positions >= context_tokens are written into their entries,
///    positions below are already cached (a prompt cached whole recomputes its
///    last position only: first_position == context_tokens - 1);
///  - position p attends to table entries [0, p - dropped_tokens]; RoPE
///    rotates by the absolute position p, so a compacted sequence's new
///    tokens keep their positions.
struct step_sequence {
  uint64_t sequence_id;
  uint32_t new_tokens;     // prefill chunk length, or 1 for a decode
  uint64_t context_tokens; // tokens already in the KV cache before this step
  uint32_t streamed_blocks = 0;
  uint64_t first_position = 0;
  uint64_t dropped_tokens = 0; // KV tokens compression dropped (whole blocks; also for a roofline)
  std::vector<uint32_t> tokens;
  uint32_t table_from = 0;           // the first table entry block_table holds
  std::vector<uint32_t> block_table; // table entries [table_from, table size)
  bool want_attention_stats = false; // return this sequence's attention mass per table block
  uint32_t attention_queries = 1;    // ... summed over the step's last this many queries (clamped to the step)
};

struct step_plan {
  uint64_t step_id = 0;
  std::vector<step_sequence> sequences;
  std::vector<slot_copy> copies; // apply first, in order
  /// Sequences that finished or were preempted since the last step: a port
  /// that keeps tables drops theirs before this step's (a sequence that comes
  /// back later carries its table whole again, table_from 0).
  std::vector<uint64_t> retired;
};

/// What a model's step produced for one sequence: the token sampled after
/// its last position (greedy, or seeded temperature sampling), that token's
/// logit, and when asked the attention mass each table block received
/// (summed over layers and heads): from the step's last attention_queries
/// queries, and from its last query alone. Empty where the compute port
/// measures none (a roofline, the CUDA twin).
struct step_token {
  uint64_t sequence_id = 0;
  uint32_t token = 0;
  float logit = 0;
  std::vector<float> block_attention;
  std::vector<float> last_query_attention;
};

struct step_output {
  uint64_t step_id = 0;
  std::vector<step_token> sequences;
};

} // namespace kvtier
