#pragma once
// One sequence's ordered list of blocks in a tier's pool.
//
// Invariants:
//  (1) Append-only: blocks are only added at the end; existing entries change
//      only by copy-on-write of the last, partial block, and leave only by
//      truncate() (the tail) or remove() (compression: full blocks before the
//      last, so every block but the last stays full).
//  (2) Every entry holds one reference on its pool slot; release_all() drops them.
//  (3) blocks().size() == ceil(tokens() / block_tokens).
//  (4) A partial last block that is shared (ref_count > 1) or hashed (the
//      prefix cache may hand it out, so it is immutable) is never written in
//      place: append copies it to a fresh slot first.

#include "runtime/block_pool.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier {

/// A slot-to-slot copy the caller must perform before writing the new slot.
struct cow_copy {
  block_id from;
  block_id to;
  uint32_t tokens; // valid tokens to copy
};

struct append_result {
  std::vector<block_id> new_blocks; // freshly allocated, in order
  std::vector<cow_copy> copies;     // at most one: the shared partial tail
  std::vector<block_hash> evicted;  // cached hashes whose slots were reused
  uint32_t evicted_sole_copies = 0; // ... of which no lower tier held a copy
};

class block_table {
public:
  explicit block_table(uint32_t block_tokens) : block_tokens_(block_tokens) {}

  /// Appends `tokens` tokens, allocating blocks from `pool` as needed.
  /// All-or-nothing: on errc::no_capacity nothing changed.
  caf::expected<append_result> append(uint64_t tokens, block_pool& pool);

  /// Adopts already-referenced full blocks (a prefix-cache hit) at the front.
  /// REQUIRES: the table is empty; each block's reference is owned by the caller
  /// and passes to the table.
  void adopt_prefix(std::vector<block_id> blocks, uint64_t tokens);

  /// A child sharing every block (parallel sampling, beam search): each block
  /// gains a reference.
  block_table fork(block_pool& pool) const;

  /// Drops every reference, tail first. The table becomes empty.
  void release_all(block_pool& pool);

  /// Keeps the first `tokens` tokens and the blocks holding them; drops the
  /// rest (a failed load, or compression compacting a sequence).
  void truncate(uint64_t tokens, block_pool& pool);

  /// Compression: removes the entries at `indices` (ascending, unique, each
  /// below the last entry, so each is a full block); tokens() falls by
  /// block_tokens for each. Returns the removed blocks, in order: their
  /// references pass to the caller, who frees them (a block another table
  /// shares stays referenced). Out-of-order or out-of-range indices are
  /// kvtier's own bug.
  std::vector<block_id> remove(std::span<const uint32_t> indices);
  /// Removes the first `n` blocks, which must be full, and hands their
  /// references to the caller (a sequence streaming its oldest blocks from a
  /// lower tier keeps only the rest here). tokens() drops by n * block_tokens.
  std::vector<block_id> take_front(size_t n);

  const std::vector<block_id>& blocks() const { return blocks_; }
  uint64_t tokens() const { return tokens_; }
  uint32_t block_tokens() const { return block_tokens_; }
  /// Tokens in the last block (block_tokens when it is full or the table empty).
  uint32_t tail_tokens() const;

private:
  uint32_t block_tokens_;
  uint64_t tokens_ = 0;
  std::vector<block_id> blocks_;
};

} // namespace kvtier
