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
  double busy_seconds = 0; // time the link spent moving bytes
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

struct step_sequence {
  uint64_t sequence_id;
  uint32_t new_tokens;     // prefill chunk length, or 1 for a decode
  uint64_t context_tokens; // tokens already in the KV cache before this step
};

struct step_plan {
  uint64_t step_id = 0;
  std::vector<step_sequence> sequences;
};

} // namespace kvtier
