#pragma once
// Turning per-head evictions into freed blocks.
//
// A block holds block_tokens token slots of every (layer, kv head) slice.
// After eviction each slice keeps its own tokens; compaction packs each
// slice's kept tokens to the front of its slots, in their original order.
// The sequence then needs blocks for the longest slice only; the blocks past
// that are freed through the block manager as ordinary frees (tail first),
// and a partially emptied last block stays, its unused slots masked.
//
// Invariants of a plan:
//  (1) tokens_after = max over slices of kept tokens; blocks_after =
//      ceil(tokens_after / block_tokens); freed_blocks = [blocks_after,
//      blocks_before) in descending order (tail first, like release_all).
//  (2) In every move, to < from, and moves of one slice are in ascending
//      `to` order: applying them in order in place never overwrites a token
//      that a later move still reads.
//  (3) padding = sum over slices of (tokens_after - kept): slots in use by
//      no token (attention masks them).

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::compression {

struct token_move {
  uint32_t slice;
  uint32_t from; // token slot before compaction
  uint32_t to;   // token slot after
};

struct compaction_plan {
  uint64_t tokens_before = 0;
  uint64_t tokens_after = 0;
  uint64_t blocks_before = 0;
  uint64_t blocks_after = 0;
  std::vector<uint64_t> freed_blocks; // logical block indices in the sequence's table
  std::vector<token_move> moves;
  uint64_t padding = 0;
};

/// REQUIRES: each kept list is ascending and within [0, tokens_before); block_tokens > 0.
compaction_plan plan_compaction(std::span<const std::vector<uint32_t>> kept_per_slice, uint64_t tokens_before,
                                uint32_t block_tokens);

} // namespace kvtier::compression
