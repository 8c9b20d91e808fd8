#pragma once
// The free slots of one tier's memory as extents (runs of adjacent slots),
// handed out as a log that runs downwards: each batch takes the free slots
// nearest below where the previous batch stopped, and the log wraps to the
// top when it reaches slot 0.
//
// Why a downward log (docs/slot_placement.md has the measurements): a tier
// evicts its blocks roughly in the order they arrived, and the block manager
// hands a demotion batch out head first, so the batch's first-evicted block
// sits in its highest slot. Evictions then free slots from the top of each
// batch's range down, and the next batch, placed below, continues where they
// leave off: the slots a batch finds free are one run. Best fit for the batch
// size, the textbook choice, measured fewer blocks per run on every link: it
// drops each batch wherever a hole fits and breaks that order.
//
// Invariants:
//  (1) Extents are non-empty, disjoint and never adjacent: a slot given back
//      next to an extent joins it, and two extents it bridges become one.
//  (2) free_count() is the sum of the extents' lengths.
//  (3) take(n) takes, from the cursor down, the highest free slots below it,
//      extent by extent, wrapping to the top when none is left below; the
//      cursor ends at the lowest slot taken last. Its runs come back
//      ascending by first slot.
//  (4) Every operation is O(log e) in the e extents (take: per run returned).
// Not thread-safe: owned by one tier's slot placement.

#include <cstddef>
#include <cstdint>
#include <map>
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
  /// Every slot of [0, capacity) free: one extent; the cursor at the top.
  explicit free_extents(uint32_t capacity);

  uint32_t capacity() const { return capacity_; }
  uint32_t free_count() const { return free_count_; }
  size_t extent_count() const { return by_first_.size(); }
  bool is_free(uint32_t slot) const;
  /// Where the next take() starts looking, downwards.
  uint32_t cursor() const { return cursor_; }

  /// Takes `n` free slots (3). REQUIRES: n <= free_count().
  std::vector<slot_run> take(uint32_t n);
  /// Takes one given free slot, leaving the cursor; false, changing nothing,
  /// when it is not free.
  bool take_slot(uint32_t slot);
  /// Gives back a taken slot (1). REQUIRES: slot < capacity() and not free.
  void give_back(uint32_t slot);

  /// The extents from the lowest slot up; for tests. O(e).
  std::vector<slot_run> extents() const;

private:
  void insert(uint32_t first, uint32_t count);
  void erase(std::map<uint32_t, uint32_t>::iterator it);

  uint32_t capacity_;
  uint32_t free_count_ = 0;
  uint32_t cursor_;
  std::map<uint32_t, uint32_t> by_first_; // first slot -> length
};

} // namespace kvtier
