#include "runtime/free_extents.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier {

free_extents::free_extents(uint32_t capacity) : capacity_(capacity), cursor_(capacity) {
  if (capacity > 0)
    insert(0, capacity);
}

void free_extents::insert(uint32_t first, uint32_t count) {
  by_first_.emplace(first, count);
  free_count_ += count;
}

void free_extents::erase(std::map<uint32_t, uint32_t>::iterator it) {
  free_count_ -= it->second;
  by_first_.erase(it);
}

bool free_extents::is_free(uint32_t slot) const {
  auto it = by_first_.upper_bound(slot);
  if (it == by_first_.begin())
    return false;
  --it;
  return slot < it->first + it->second;
}

std::vector<slot_run> free_extents::take(uint32_t n) {
  KVTIER_CHECK(n <= free_count_, "free_extents::take: more slots asked for than are free");
  std::vector<slot_run> runs;
  while (n > 0) {
    // The extent that holds cursor_ - 1, or the nearest one below it.
    auto it = by_first_.lower_bound(cursor_);
    if (it == by_first_.begin()) {
      cursor_ = capacity_; // nothing free below: wrap to the top
      continue;
    }
    --it;
    auto [first, length] = *it;
    uint32_t end = std::min(first + length, cursor_);
    uint32_t used = std::min(end - first, n);
    erase(it);
    if (end - used > first)
      insert(first, end - used - first);
    if (end < first + length)
      insert(end, first + length - end);
    runs.push_back({end - used, used});
    n -= used;
    cursor_ = end - used;
  }
  std::sort(runs.begin(), runs.end(), [](const slot_run& a, const slot_run& b) { return a.first < b.first; });
  return runs;
}

bool free_extents::take_slot(uint32_t slot) {
  auto it = by_first_.upper_bound(slot);
  if (it == by_first_.begin())
    return false;
  --it;
  auto [first, length] = *it;
  if (slot >= first + length)
    return false;
  erase(it);
  if (slot > first)
    insert(first, slot - first);
  if (slot + 1 < first + length)
    insert(slot + 1, first + length - slot - 1);
  return true;
}

void free_extents::give_back(uint32_t slot) {
  KVTIER_CHECK(slot < capacity_ && !is_free(slot), "free_extents::give_back: slot out of range or already free");
  uint32_t first = slot;
  uint32_t count = 1;
  auto after = by_first_.find(slot + 1);
  if (after != by_first_.end()) {
    count += after->second;
    erase(after);
  }
  auto before = by_first_.lower_bound(slot);
  if (before != by_first_.begin()) {
    --before;
    if (before->first + before->second == slot) {
      first = before->first;
      count += before->second;
      erase(before);
    }
  }
  insert(first, count);
}

std::vector<slot_run> free_extents::extents() const {
  std::vector<slot_run> out;
  out.reserve(by_first_.size());
  for (auto [first, length] : by_first_)
    out.push_back({first, length});
  return out;
}

} // namespace kvtier
