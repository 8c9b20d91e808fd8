#pragma once
// A set of block hashes with a capacity, least recently used out first: the
// cluster's remote tier (which blocks it holds) and the router's view of what
// each replica holds. No payload, no timing: who pays for moving a block is
// the caller's business. Built on the block manager's own structures (a
// block_pool whose clean list is the LRU order, a prefix_index from hash to
// slot), so nothing allocates after construction.
//
// Invariants: size() <= capacity(); a hash is held at most once; a capacity
// of 0 holds nothing.
//
// The tables are large (the remote tier's run to hundreds of MiB), so every
// lookup misses the cache; the operations over a chain prefetch the index
// buckets and slots of the hashes a few places ahead. Prefetches are hints:
// the result is that of the same operations one hash at a time.

#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/prefix_index.hpp"

#include <algorithm>
#include <cstdint>
#include <span>

namespace kvtier::sim {

class hash_lru {
public:
  explicit hash_lru(uint32_t capacity)
      : capacity_(capacity), pool_(std::max<uint32_t>(1, capacity)), index_(std::max<uint32_t>(1, capacity)) {}

  uint32_t capacity() const { return capacity_; }
  uint64_t evictions() const { return evictions_; }
  bool contains(const block_hash& h) const { return capacity_ > 0 && index_.find(h) != invalid_block; }

  /// How many leading hashes of `chain` are held; those become the most recent.
  size_t prefix(std::span<const block_hash> chain) {
    if (capacity_ == 0)
      return 0;
    size_t n = 0;
    for (size_t i = 0; i < chain.size(); ++i) {
      prefetch_ahead(chain, i);
      auto id = index_.find(chain[i]);
      if (id == invalid_block)
        break;
      touch(id);
      ++n;
    }
    return n;
  }

  /// Starts loading what a lookup of `h` reads first.
  void prefetch(const block_hash& h) const {
    if (capacity_ > 0)
      index_.prefetch(h);
  }

  /// True when `h` is held; it becomes the most recent.
  bool touch(const block_hash& h) {
    if (capacity_ == 0)
      return false;
    auto id = index_.find(h);
    if (id == invalid_block)
      return false;
    touch(id);
    return true;
  }

  /// Holds `h` (the most recent); returns true when it was not held before.
  bool insert(const block_hash& h) {
    if (capacity_ == 0)
      return false;
    if (auto id = index_.find(h); id != invalid_block) {
      touch(id);
      return false;
    }
    auto a = pool_.allocate(); // never empty: no slot stays referenced
    if (!a->evicted.empty()) {
      index_.erase(a->evicted);
      ++evictions_;
    }
    pool_.set_hash(a->id, h);
    index_.insert(h, a->id);
    pool_.release_backed(a->id); // the clean list's most recent end
    // The next insert evicts the new least recent block: load its bucket.
    if (auto next = pool_.peek_lru(); next != invalid_block && !pool_.hash(next).empty())
      index_.prefetch(pool_.hash(next));
    return true;
  }

  /// insert() of every hash of `chain` in order; returns how many were new.
  size_t insert(std::span<const block_hash> chain) {
    if (capacity_ == 0)
      return 0;
    size_t added = 0;
    for (size_t i = 0; i < chain.size(); ++i) {
      prefetch_ahead(chain, i);
      added += insert(chain[i]) ? 1 : 0;
    }
    return added;
  }

private:
  // Buckets `bucket_ahead` hashes ahead; the slot `slot_ahead` hashes ahead,
  // whose bucket an earlier call loaded.
  static constexpr size_t bucket_ahead = 8;
  static constexpr size_t slot_ahead = 4;
  void prefetch_ahead(std::span<const block_hash> chain, size_t i) const {
    if (i + bucket_ahead < chain.size())
      index_.prefetch(chain[i + bucket_ahead]);
    if (i + slot_ahead < chain.size())
      if (auto id = index_.find(chain[i + slot_ahead]); id != invalid_block)
        pool_.prefetch(id);
  }

  void touch(block_id id) {
    pool_.ref(id);
    pool_.release_backed(id);
  }

  uint32_t capacity_;
  uint64_t evictions_ = 0;
  block_pool pool_;
  prefix_index index_;
};

} // namespace kvtier::sim
