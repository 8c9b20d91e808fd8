#pragma once
// Map from a full block's chained hash to the slot that holds it in one tier.
//
// Open addressing with linear probing and backward-shift deletion over a
// table sized once at construction (power of two, at least twice the
// capacity), so inserts and erases never allocate. Keys are block hashes,
// whose all-zero value marks an empty bucket.
//
// Invariant: at most `capacity` entries; insert() beyond that is a caller bug.

#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier {

class prefix_index {
public:
  explicit prefix_index(uint32_t capacity);

  /// The slot holding `hash`, or invalid_block.
  block_id find(const block_hash& hash) const;
  /// Adds or replaces the mapping for `hash`.
  void insert(const block_hash& hash, block_id id);
  /// Removes `hash` if present; returns whether it was.
  bool erase(const block_hash& hash);

  /// Number of leading hashes of `chain` present in the index: the longest
  /// cached prefix, in blocks.
  size_t longest_prefix(std::span<const block_hash> chain) const;

  uint32_t size() const { return size_; }
  uint32_t capacity() const { return capacity_; }

private:
  struct bucket {
    block_hash key;
    block_id value;
  };
  size_t home(const block_hash& h) const { return static_cast<size_t>(h.lo) & mask_; }

  uint32_t capacity_;
  uint32_t size_ = 0;
  size_t mask_;
  std::vector<bucket> buckets_;
};

} // namespace kvtier
