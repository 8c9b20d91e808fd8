#pragma once
// THE seam between kvtier's actors and the world: data movement between tiers
// and model compute. Two implementations stand behind it: the real one (real/:
// the engines of kernels/ and io/, a compute port) and the simulated one
// (sim/, modeled timing on CAF's virtual clock). Actors never ask which. What
// crosses it (jobs, plans, link counters) is plain data in runtime/backend.hpp.
//
// Contract shared by every operation: submit() returns at once; when the work
// is done, the backend sends ONE completion message to the `notify` actor:
//   (completion_atom, uint64_t tag, uint64_t bytes_moved, caf::error status)
// A real backend sends it from its completion thread; the simulated backend
// schedules it on the virtual clock at the modeled finish time. A failed
// operation reports a non-empty status and, for reads, moved no valid bytes.
//
// The caller pins every slot named in a job (block state `moving`) from
// submit until its completion arrives; backends may touch those slots only.
//
// A compute port that runs a model (needs().model_inputs) sends, before a
// step's completion and from the same thread, one
//   (sampled_atom, step_output)
// with the token each sequence of the step sampled; the plans it receives
// carry token ids, positions and block tables (runtime/backend.hpp).

#include "runtime/backend.hpp"
#include "runtime/recovered_block.hpp"

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

#include <string>
#include <vector>

namespace kvtier {

using completion_atom = caf::atom_constant<caf::atom("completion")>;
using sampled_atom = caf::atom_constant<caf::atom("sampled")>;

/// What a compute port needs in its step plans.
struct compute_needs {
  bool model_inputs = false; // token ids, positions, block tables, copy-on-write copies
  uint32_t vocab_size = 0;   // token ids derived from trace hashes are below it
  /// The port keeps each sequence's block table from step to step
  /// (step_sequence::table_from, step_plan::retired): a step then carries
  /// only the entries that changed, so its cost does not grow with the
  /// tables. Otherwise every step carries every table whole.
  bool keeps_tables = false;
};

/// Copies between HBM and DRAM.
class copy_engine {
public:
  virtual ~copy_engine() = default;
  /// Moves every block of `job` (all layers), converting between the tiers'
  /// layouts; one completion when all have landed.
  virtual void submit(copy_job job, caf::actor notify) = 0;
  virtual link_counters h2d_counters() const = 0;
  virtual link_counters d2h_counters() const = 0;
};

/// Pages between DRAM and NVMe.
class page_store {
public:
  virtual ~page_store() = default;
  /// Writes or reads whole blocks; a read whose page fails its checksum or
  /// header check completes with errc::corrupted and is treated as a miss.
  virtual void submit(page_job job, caf::actor notify) = 0;
  virtual link_counters read_counters() const = 0;
  virtual link_counters write_counters() const = 0;
  /// Blocks the store already held when it opened (a persistent store after a
  /// restart): the block manager adopts them, so prefix lookup finds them.
  virtual std::vector<recovered_block> recovered_blocks() const { return {}; }
};

/// Model compute.
class compute_port {
public:
  virtual ~compute_port() = default;
  /// Runs one forward step; completion's `bytes` carries the step's
  /// duration in nanoseconds (modeled or measured). The plan is the port's:
  /// one that runs it later keeps it without a copy.
  virtual void execute(step_plan plan, caf::actor notify, uint64_t tag) = 0;
  /// A roofline needs shapes only; a model needs the plan's model inputs.
  virtual compute_needs needs() const { return {}; }
  /// What runs behind the port, for the report ("modeled", "model (cpu)").
  virtual std::string kind() const { return "modeled"; }
};

/// The whole backend.
class backend {
public:
  virtual ~backend() = default;
  virtual std::string name() const = 0;
  virtual copy_engine& copies() = 0;
  /// nullptr when the configuration has no NVMe tier.
  virtual page_store* pages() = 0;
  virtual compute_port& compute() = 0;
};

} // namespace kvtier

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::step_output)
