#pragma once
// THE seam between kvtier's actors and the world: time, data movement between
// tiers, and model compute. Two implementations stand behind it: the real one
// (kernels/ for CUDA or its CPU twin, io/ for NVMe) and the simulated one
// (sim/, modeled timing on CAF's virtual clock). Actors never ask which.
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

#include "runtime/block_hash.hpp"
#include "runtime/tier.hpp"
#include "runtime/tier_layout.hpp"

#include <caf/actor.hpp>
#include <caf/atom.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvtier {

using completion_atom = caf::atom_constant<caf::atom("completion")>;

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
  double busy_seconds = 0; // time the link spent moving bytes
};

class copy_engine {
public:
  virtual ~copy_engine() = default;
  /// Moves every block of `job` (all layers), converting between the tiers'
  /// layouts; one completion when all have landed.
  virtual void submit(copy_job job, caf::actor notify) = 0;
  virtual link_counters h2d_counters() const = 0;
  virtual link_counters d2h_counters() const = 0;
};

// -- pages between DRAM and NVMe -----------------------------------------------

enum class page_op : uint8_t { write, read };

struct page_transfer {
  uint32_t dram_slot;
  uint32_t nvme_slot;
  block_hash hash;     // written into the page header; checked on read
  uint64_t salt_id = 0;
};

struct page_job {
  page_op op = page_op::write;
  std::vector<page_transfer> pages;
  uint64_t tag = 0;
};

class page_store {
public:
  virtual ~page_store() = default;
  /// Writes or reads whole blocks; a read whose page fails its checksum or
  /// header check completes with errc::corrupted and is treated as a miss.
  virtual void submit(page_job job, caf::actor notify) = 0;
  virtual link_counters read_counters() const = 0;
  virtual link_counters write_counters() const = 0;
};

// -- model compute -----------------------------------------------------------

struct step_sequence {
  uint64_t sequence_id;
  uint32_t new_tokens;      // prefill chunk length, or 1 for a decode
  uint64_t context_tokens;  // tokens already in the KV cache before this step
  uint32_t hbm_blocks;      // blocks resident in HBM that attention reads
};

struct step_plan {
  uint64_t step_id = 0;
  std::vector<step_sequence> sequences;
};

class compute_port {
public:
  virtual ~compute_port() = default;
  /// Runs one forward step; completion's `bytes` carries the step's
  /// duration in nanoseconds (modeled or measured).
  virtual void execute(const step_plan& plan, caf::actor notify, uint64_t tag) = 0;
};

// -- the whole backend -----------------------------------------------------------

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
