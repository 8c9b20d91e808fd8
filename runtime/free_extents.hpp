#pragma once
// The free slots of one tier's memory as extents: runs of adjacent slots.
// Placing a batch of blocks takes as few extents as free space allows, so the
// batch's copies merge into long DMAs (kernels/copy's dram_runs).
//
// Invariants:
//  (1) Extents are non-empty, disjoint and never adjacent: a slot given back
//      next to an extent joins it, and two extents it bridges become one.
//  (2) by_first_ and by_size_ hold the same extents; free_count() is the sum
//      of their lengths.
//  (3) take(n) is best fit: the shortest extent that holds all n (the lowest
//      one among equals), from its first slot. When none does, the longest
//      extent (the lowest among equals) is taken whole and the rest placed
//      the same way. The runs come back ascending by first slot.
//  (4) Every operation is O(log e) in the e extents (take: per run returned).
// Not thread-safe: owned by one tier's cache (actors/tier_cache.hpp).

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <utility>
#include <vector>

namespace kvtier {

/// Slots [first, first + count).
struct slot_run {
  uint32_t first = 0;
  uint32_t count = 0;
  bool operator==(const slot_run&) const = default;
};

class free_extents {
public:
  /// Every slot of [0, capacity) free: one extent.
  explicit free_extents(uint32_t capacity);

  uint32_t capacity() const { return capacity_; }
  uint32_t free_count() const { return free_count_; }
  size_t extent_count() const { return by_first_.size(); }
  bool is_free(uint32_t slot) const;

  /// Takes `n` free slots (3). REQUIRES: n <= free_count().
  std::vector<slot_run> take(uint32_t n);
  /// Takes one given free slot; false, changing nothing, when it is not free.
  bool take_slot(uint32_t slot);
  /// Gives back a taken slot (1). REQUIRES: slot < capacity() and not free.
  void give_back(uint32_t slot);

  /// The extents from the lowest slot up; for tests and reports. O(e).
  std::vector<slot_run> extents() const;

private:
  void insert(uint32_t first, uint32_t count);
  void erase(std::map<uint32_t, uint32_t>::iterator it);

  uint32_t capacity_;
  uint32_t free_count_ = 0;
  std::map<uint32_t, uint32_t> by_first_;          // first slot -> length
  std::set<std::pair<uint32_t, uint32_t>> by_size_; // (length, first slot)
};

} // namespace kvtier
