#include "runtime/slot_placement.hpp"

#include "runtime/check.hpp"

namespace kvtier {

slot_placement::slot_placement(uint32_t capacity, slot_placement_kind kind)
    : kind_(kind), free_(kind == slot_placement_kind::contiguous ? capacity : 0) {
  if (kind == slot_placement_kind::contiguous) {
    slot_of_ = zeroed_array<uint32_t>(capacity);
    block_in_ = zeroed_array<uint32_t>(capacity);
  }
}

bool slot_placement::placed(block_id b) const {
  return kind_ == slot_placement_kind::eviction_order || get(slot_of_, index_of(b)) != unplaced;
}

uint32_t slot_placement::slot_of(block_id b) const {
  if (kind_ == slot_placement_kind::eviction_order)
    return index_of(b);
  auto slot = get(slot_of_, index_of(b));
  KVTIER_CHECK(slot != unplaced, "slot_placement::slot_of: the block has no slot (a copy's block was not placed)");
  return slot;
}

block_id slot_placement::block_in(uint32_t slot) const {
  if (kind_ == slot_placement_kind::eviction_order)
    return block_id{slot};
  return slot < block_in_.size() && get(block_in_, slot) != unplaced ? block_id{get(block_in_, slot)} : invalid_block;
}

void slot_placement::place(std::span<const block_id> blocks) {
  if (kind_ == slot_placement_kind::eviction_order)
    return;
  uint32_t wanted = 0;
  for (auto b : blocks)
    wanted += get(slot_of_, index_of(b)) == unplaced ? 1 : 0;
  if (wanted == 0)
    return;
  auto runs = free_.take(wanted);
  auto run = runs.begin();
  uint32_t next = run->first;
  for (auto b : blocks) {
    if (get(slot_of_, index_of(b)) != unplaced)
      continue;
    if (next == run->first + run->count)
      next = (++run)->first;
    set(slot_of_, index_of(b), next);
    set(block_in_, next, index_of(b));
    ++next;
  }
}

bool slot_placement::place_at(block_id b, uint32_t slot) {
  if (kind_ == slot_placement_kind::eviction_order)
    return index_of(b) == slot;
  if (get(slot_of_, index_of(b)) != unplaced || !free_.take_slot(slot))
    return false;
  set(slot_of_, index_of(b), slot);
  set(block_in_, slot, index_of(b));
  return true;
}

void slot_placement::release(block_id b) {
  if (kind_ == slot_placement_kind::eviction_order)
    return;
  auto slot = get(slot_of_, index_of(b));
  if (slot == unplaced)
    return;
  set(block_in_, slot, unplaced);
  free_.give_back(slot);
  set(slot_of_, index_of(b), unplaced);
}

} // namespace kvtier
