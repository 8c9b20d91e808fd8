#pragma once
// Which blocks of a sequence's table to drop, at block granularity, from the
// attention mass a model measured per block (the real engine's compaction;
// docs/compression.md §1b). Token-level policies (policy.hpp) score tokens of
// one (layer, kv head); a pooled table drops whole blocks of every layer and
// head at once, so here a block's score is its mass summed over layers and
// heads, and the budget counts blocks.
//
// Invariants of blocks_to_drop's result:
//  (1) ascending table indices, no duplicates, never the last block (it may
//      be partial and is where the next tokens go), so every dropped block is
//      full;
//  (2) the protected blocks are kept: those holding the first `sinks` tokens
//      and the last `recent` tokens of the table;
//  (3) the table keeps max(keep_blocks, protected) blocks, or all when it has
//      no more than that;
//  (4) deterministic; ties in score go to the later block.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace kvtier::compression {

/// The real engine's defaults: attention sinks, the recent window every
/// policy keeps, and SnapKV's observation window (the last prompt queries).
inline constexpr uint32_t sink_tokens = 4;
inline constexpr uint32_t recent_tokens = 32;
inline constexpr uint32_t observation_window = 32;

struct block_choice {
  std::string_view policy; // h2o, h2o_window, h2o_raw, snapkv, streaming_llm, sliding_window, random, ratio
  uint64_t kv_tokens = 0;  // tokens in the table
  uint32_t block_tokens = 16;
  uint64_t keep_tokens = 0;        // the budget (budget_spec::tokens); rounded up to blocks
  uint32_t sinks = sink_tokens;    // tokens; streaming_llm and the h2o and snapkv families protect them
  uint32_t recent = recent_tokens; // tokens; every policy protects them (sliding_window and ratio: their window)
  /// Per table block, summed over the last `mass_queries` queries (layers and
  /// heads too); empty where no model measured it: then the mass policies
  /// fall back to recency (the simulator's timing does not depend on which).
  std::span<const float> mass;
  uint32_t mass_queries = 1;
  /// H2O's accumulation: per table block, the scores earlier passes gave
  /// it (empty, or one per block); added to this pass's for the h2o family.
  std::span<const double> earlier;
  uint64_t seed = 0; // random's
};

/// True for the policies that accumulate scores over passes (the h2o family).
bool accumulates(std::string_view policy);

/// Ascending table indices of the blocks to drop.
std::vector<uint32_t> blocks_to_drop(const block_choice& c);

/// Per block, what the policy ranks by (higher = keep): normalized H2O
/// divides a block's mass by the number of observed queries that could see
/// it (the queries at table entries at or past the block's first); raw H2O
/// and SnapKV take the mass as it is; the positional policies the index.
/// The h2o family adds `earlier` (accumulated over passes).
std::vector<double> block_scores(const block_choice& c);

/// The share of `mass` held by the blocks not in `dropped` (1 when the mass is empty or zero).
double mass_kept(std::span<const float> mass, std::span<const uint32_t> dropped);

} // namespace kvtier::compression
