#pragma once
// kvtier's whole message vocabulary and the typed interfaces of its actors.
// Every message is local to one process (the graph runs in one actor system),
// so payload structs are allowed as unsafe message types; nothing here is
// serialized.
//
//   scheduler --plan-->  block_manager --move--> transfer_engine --> backend
//       ^   <--grant--        |   ^                    |
//       |   <--ready--        |   +----xfer_done-------+
//   sampled, completion       |
//   (compute port)            |
//       +--stats--> compression --compress--> block_manager

#include "actors/block_manager_state.hpp"
#include "actors/seam.hpp"
#include "runtime/block_hash.hpp"

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>
#include <caf/typed_actor.hpp>
#include <caf/replies_to.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace kvtier {

// -- atoms (CAF 0.17: at most 10 characters) -----------------------------------
using arrive_atom = caf::atom_constant<caf::atom("arrive")>;
using plan_atom = caf::atom_constant<caf::atom("plan")>;
using ready_atom = caf::atom_constant<caf::atom("ready")>;
using move_atom = caf::atom_constant<caf::atom("move")>;
using moved_atom = caf::atom_constant<caf::atom("moved")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using compress_atom = caf::atom_constant<caf::atom("compress")>;
using compacted_atom = caf::atom_constant<caf::atom("compacted")>;
using attach_atom = caf::atom_constant<caf::atom("attach")>;

// -- payloads -------------------------------------------------------------------

/// A request as the scheduler receives it.
struct request_spec {
  uint64_t id = 0;
  uint64_t prompt_tokens = 0;
  uint32_t output_tokens = 1;
  std::vector<uint64_t> external_ids; // prefix block ids from a trace (may be empty)
  uint32_t external_block_tokens = 0;
  uint64_t tenant = 0; // salt id: tenants never share blocks
  /// The prompt's token ids, when the request carries them (then
  /// prompt_tokens == prompt.size()); else a model derives them from the
  /// trace's block ids, or from the request id.
  std::vector<uint32_t> prompt;
  /// Leading prompt tokens whose KV arrives with the request (fetched from a
  /// remote tier, or handed over by a prefill node): admission allocates and
  /// indexes their blocks like computed ones, but no step computes them.
  /// Tokens the local cache already holds are taken from it instead.
  uint64_t supplied_tokens = 0;
};

/// One operation of a step plan, applied by the block manager in order.
struct sequence_op {
  enum class kind : uint8_t {
    admit,   // register with its chain, take the cached prefix, then grow by `tokens`
    grow,    // append `tokens` to the HBM table
    swap_in, // bring a swapped sequence back
    release, // finished: free its blocks now
    preempt, // make room: swap or recompute (mode)
  };
  kind what = kind::grow;
  uint64_t seq = 0;
  uint32_t tokens = 0;        // grow: tokens to append; admit: most tokens to append after the hit
  uint64_t prompt_tokens = 0; // admit: the prompt the chain describes
  uint64_t target_tokens = 0; // admit: tokens to have cached before decoding (> prompt when recomputing)
  std::vector<block_hash> chain;
  preempt_mode mode = preempt_mode::recompute;
};

struct step_ops {
  uint64_t step = 0;
  std::vector<sequence_op> ops;
};

struct op_result {
  uint64_t seq = 0;
  admit_status status = admit_status::ready;
  uint64_t tokens = 0; // admit: prefix tokens found; preempt: tokens the sequence held
  std::array<uint32_t, tier_count> hits_by_tier{};
  preempt_mode mode = preempt_mode::recompute; // preempt: the mode used
  // grow and a ready admit: the leading logical blocks its step reads from
  // DRAM (streaming); the roofline charges them to PCIe.
  uint32_t streamed_blocks = 0;
  // grow and a ready admit, when the compute port reads model inputs: the
  // sequence's block table after the op (streamed blocks first, with
  // streamed_slot_bit) from entry table_from on: the entries before it are
  // those the earlier results for this sequence carried, unchanged (0 and the
  // whole table the first time, and after a swap-in, compaction or spill; a
  // decode's grow carries nothing or the block it appended). And the
  // copy-on-write copies to apply before the step writes.
  uint32_t table_from = 0;
  std::vector<uint32_t> table;
  std::vector<slot_copy> copies;
  uint64_t dropped_tokens = 0; // grow and admit: positions compaction removed from the table
};

struct step_grant {
  uint64_t step = 0;
  std::vector<op_result> results; // one per op, same order
  uint32_t hbm_free = 0;
  uint32_t hbm_used = 0;
  uint32_t dram_used = 0;
};

/// What the compression actor learns when a sequence finished its prefill
/// (or crossed another every_tokens multiple): its length and, where the
/// compute port measured them, the attention mass of each block of the table
/// the step read (step_token's two sums), with that table's HBM slots.
struct prefill_stats {
  uint64_t seq = 0;
  uint64_t tokens = 0;                // positions covered
  uint64_t dropped_tokens = 0;        // of which compaction removed from the table: it holds tokens - dropped_tokens
  std::vector<float> block_mass;      // per table block, summed over `mass_queries` last queries; may be empty
  std::vector<float> last_block_mass; // per table block, the last query's alone
  uint32_t mass_queries = 1;
  std::vector<uint32_t> slots; // the table's HBM slots (model inputs only)
};

/// Compression's decision for one sequence: the table blocks to remove.
struct compress_order {
  uint64_t seq = 0;
  std::vector<uint32_t> indices; // ascending table indices, each a full block before the last
  std::vector<uint32_t> slots;   // the slot of each as the policy saw it (empty: unchecked)
  float mass_kept = -1;          // share of the measured last-query mass the kept blocks hold; -1: none measured
};

} // namespace kvtier

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::request_spec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::step_ops)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::step_grant)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::transfer_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::prefill_stats)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::compress_order)

namespace kvtier {

// -- typed interfaces ---------------------------------------------------------------

using scheduler_actor = caf::typed_actor<
    // A request arrives.
    caf::reacts_to<arrive_atom, request_spec>,
    // The compute port finished a step: (tag = step id, bytes = duration ns, status).
    caf::reacts_to<completion_atom, uint64_t, uint64_t, caf::error>,
    // A model's compute port: the tokens a step sampled (before its completion).
    caf::reacts_to<sampled_atom, step_output>,
    // A sequence's blocks are all resident now: (seq, tokens in its table).
    caf::reacts_to<ready_atom, uint64_t, uint64_t>,
    // Compression removed blocks of a sequence: (seq, positions now dropped from its table).
    caf::reacts_to<compacted_atom, uint64_t, uint64_t>,
    // The block manager answered a plan.
    caf::reacts_to<plan_atom, step_grant>>;

using block_manager_actor = caf::typed_actor<
    // Applies a step's operations in order; answers (plan, step_grant) to the scheduler.
    caf::reacts_to<plan_atom, step_ops>,
    // A transfer batch finished: (tag, ok).
    caf::reacts_to<moved_atom, uint64_t, bool>,
    // Remove the blocks compression chose; answers compacted to the scheduler.
    caf::reacts_to<compress_atom, compress_order>,
    // Whom to tell when sequences become ready.
    caf::reacts_to<attach_atom, scheduler_actor>>;

using transfer_engine_actor = caf::typed_actor<
    // Submit one batch of block moves over its link; moved goes back to the sender.
    caf::reacts_to<move_atom, transfer_batch>,
    // The backend finished a submission.
    caf::reacts_to<completion_atom, uint64_t, uint64_t, caf::error>>;

using compression_actor = caf::typed_actor<
    // A sequence finished its prefill.
    caf::reacts_to<stats_atom, prefill_stats>>;

} // namespace kvtier
