#include "runtime/block_pool.hpp"

#include "runtime/check.hpp"

namespace kvtier {

block_pool::block_pool(uint32_t capacity) : capacity_(capacity), meta_(capacity + 1) {
  KVTIER_CHECK(capacity < std::numeric_limits<uint32_t>::max(), "block_pool: capacity too large");
  auto& sentinel = meta_[capacity_];
  sentinel.prev = sentinel.next = capacity_;
  for (uint32_t i = 0; i < capacity_; ++i) {
    meta_[i].state = block_state::free;
    push_back(i);
  }
}

void block_pool::unlink(uint32_t i) {
  auto& m = meta_[i];
  meta_[m.prev].next = m.next;
  meta_[m.next].prev = m.prev;
  m.on_queue = 0;
  --free_count_;
  ++queue_version_;
}

void block_pool::push_back(uint32_t i) {
  auto& sentinel = meta_[capacity_];
  auto& m = meta_[i];
  m.prev = sentinel.prev;
  m.next = capacity_;
  meta_[sentinel.prev].next = i;
  sentinel.prev = i;
  m.on_queue = 1;
  ++free_count_;
  ++queue_version_;
}

void block_pool::push_front(uint32_t i) {
  auto& sentinel = meta_[capacity_];
  auto& m = meta_[i];
  m.next = sentinel.next;
  m.prev = capacity_;
  meta_[sentinel.next].prev = i;
  sentinel.next = i;
  m.on_queue = 1;
  ++free_count_;
  ++queue_version_;
}

std::optional<allocation> block_pool::allocate() {
  uint32_t head = meta_[capacity_].next;
  if (head == capacity_)
    return std::nullopt;
  unlink(head);
  auto& m = meta_[head];
  allocation result{block_id{head}, m.hash};
  m.hash = {};
  m.ref_count = 1;
  m.state = block_state::writing;
  return result;
}

void block_pool::ref(block_id id) {
  auto& m = meta_[index_of(id)];
  if (m.ref_count++ == 0) {
    KVTIER_CHECK(m.on_queue, "block_pool::ref: unreferenced block missing from the free queue");
    KVTIER_CHECK(!m.hash.empty(), "block_pool::ref: only cached (hashed) free blocks can be revived");
    unlink(index_of(id));
    m.state = block_state::full;
  }
}

bool block_pool::release(block_id id, queue_end end) {
  auto& m = meta_[index_of(id)];
  KVTIER_CHECK(m.ref_count > 0, "block_pool::release: block is not referenced (double free)");
  if (--m.ref_count > 0)
    return false;
  m.state = block_state::free;
  if (end == queue_end::most_recent)
    push_back(index_of(id));
  else
    push_front(index_of(id));
  return true;
}

void block_pool::release_sequence(std::span<const block_id> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    release(*it);
}

void block_pool::forget(block_id id) {
  auto i = index_of(id);
  KVTIER_CHECK(meta_[i].ref_count == 0, "block_pool::forget: block is referenced");
  meta_[i].hash = {};
  unlink(i);
  push_front(i);
}

void block_pool::set_state(block_id id, block_state s) {
  KVTIER_CHECK(s != block_state::free || meta_[index_of(id)].ref_count == 0,
               "block_pool::set_state: a referenced block cannot be free");
  meta_[index_of(id)].state = s;
}

block_id block_pool::peek_lru() const {
  uint32_t head = meta_[capacity_].next;
  return head == capacity_ ? invalid_block : block_id{head};
}

block_id block_pool::next_free(block_id id) const {
  uint32_t next = meta_[index_of(id)].next;
  return next == capacity_ ? invalid_block : block_id{next};
}

std::vector<block_id> block_pool::free_queue_order(uint32_t limit) const {
  std::vector<block_id> out;
  for (uint32_t i = meta_[capacity_].next; i != capacity_ && out.size() < limit; i = meta_[i].next)
    out.push_back(block_id{i});
  return out;
}

} // namespace kvtier
