#pragma once
// Map from a full block's chained hash to the slot that holds it in one tier.
//
// Open addressing with linear probing and backward-shift deletion over a
// table sized once at construction (power of two, at least twice the
// capacity), so inserts and erases never allocate. A bucket is 16 bytes: the
// hash's low 64 bits and 32 of its high bits (96 bits decide equality; a
// false match among a billion entries has odds of about 1e-11) and the slot.
// The all-zero key marks an empty bucket, so a new table is zero-filled
// memory (runtime/zeroed_array.hpp), not written until used.
//
// Invariant: at most `capacity` entries; insert() beyond that is a caller bug.
//
// Large tables miss the cache on every lookup; a caller that knows its next
// lookups (a chain, a walk) calls prefetch() a few keys ahead so the probe
// finds its bucket loaded. A prefetch is a hint: it changes nothing.

#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/zeroed_array.hpp"

#include <cstdint>
#include <span>
#include <type_traits>

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

  /// Starts loading the bucket where a lookup of `hash` begins.
  void prefetch(const block_hash& hash) const { __builtin_prefetch(&buckets_[home(key_of(hash).lo)]); }

  uint32_t size() const { return size_; }
  uint32_t capacity() const { return capacity_; }

private:
  struct key96 {
    uint64_t lo = 0;
    uint32_t hi = 0;
    bool empty() const { return lo == 0 && hi == 0; }
  };
  struct bucket {
    uint64_t lo;
    uint32_t hi;
    block_id value;
    bool holds(const key96& k) const { return lo == k.lo && hi == k.hi; }
    bool empty() const { return lo == 0 && hi == 0; }
  };
  static_assert(sizeof(bucket) == 16, "a prefix-index bucket is 16 bytes");
  static_assert(std::is_trivially_default_constructible_v<bucket>, "a new table's buckets are its zero-filled bytes");
  static key96 key_of(const block_hash& h) {
    key96 k{h.lo, static_cast<uint32_t>(h.hi)};
    if (k.empty())
      k.hi = 1; // keep the all-zero key for empty buckets
    return k;
  }
  size_t home(uint64_t lo) const { return static_cast<size_t>(lo) & mask_; }

  uint32_t capacity_;
  uint32_t size_ = 0;
  size_t mask_;
  zeroed_array<bucket> buckets_; // on huge pages from 2 MiB up
};

} // namespace kvtier
