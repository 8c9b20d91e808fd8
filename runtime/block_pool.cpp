#include "runtime/block_pool.hpp"

#include "runtime/check.hpp"

namespace kvtier {

block_pool::block_pool(uint32_t capacity) : capacity_(capacity), meta_(size_t{capacity} + 3) {
  KVTIER_CHECK(capacity < std::numeric_limits<uint32_t>::max() - 2, "block_pool: capacity too large");
  static_assert(block_state{} == block_state::free, "a never-used slot's zero bytes say it is free");
  for (uint8_t list : {clean_list, dirty_list}) {
    auto s = sentinel(list);
    meta_[s].prev = meta_[s].next = s;
  }
  // Every slot starts on the clean list in slot order, as if pushed one by
  // one; the run node stands for them until each is first touched (6).
  if (capacity_ > 0) {
    auto s = sentinel(clean_list), run = fresh_run();
    meta_[run].prev = meta_[run].next = s;
    meta_[s].prev = meta_[s].next = run;
    meta_[run].on_queue = clean_list;
  }
  free_count_ = clean_count_ = capacity_;
  queue_version_ = capacity_;
}

void block_pool::link_fresh_through(uint32_t i) {
  const uint32_t run = fresh_run();
  for (uint32_t j = fresh_; j <= i; ++j) {
    auto& m = meta_[j];
    m.prev = meta_[run].prev;
    m.next = run;
    meta_[meta_[run].prev].next = j;
    meta_[run].prev = j;
    m.on_queue = clean_list;
  }
  fresh_ = i + 1;
  if (fresh_ == capacity_) {
    meta_[meta_[run].prev].next = meta_[run].next;
    meta_[meta_[run].next].prev = meta_[run].prev;
    meta_[run].on_queue = 0;
  }
}

block_id block_pool::after_fresh_run() const {
  uint32_t next = meta_[fresh_run()].next;
  return next >= capacity_ ? invalid_block : block_id{next};
}

void block_pool::unlink(uint32_t i) {
  auto& m = meta_[i];
  meta_[m.prev].next = m.next;
  meta_[m.next].prev = m.prev;
  if (m.on_queue == clean_list)
    --clean_count_;
  m.on_queue = 0;
  --free_count_;
  ++queue_version_;
}

void block_pool::push(uint32_t i, uint8_t list, queue_end end) {
  uint32_t s = sentinel(list);
  auto& m = meta_[i];
  if (end == queue_end::most_recent) {
    m.prev = meta_[s].prev;
    m.next = s;
    meta_[meta_[s].prev].next = i;
    meta_[s].prev = i;
  } else {
    m.next = meta_[s].next;
    m.prev = s;
    meta_[meta_[s].next].prev = i;
    meta_[s].next = i;
  }
  m.on_queue = list;
  if (list == clean_list)
    ++clean_count_;
  ++free_count_;
  ++queue_version_;
}

std::optional<allocation> block_pool::allocate() {
  uint32_t head = meta_[sentinel(clean_list)].next;
  if (head == fresh_run()) {
    head = fresh_;
    link_fresh_through(head);
  }
  if (head == sentinel(clean_list))
    head = meta_[sentinel(dirty_list)].next;
  if (head == sentinel(dirty_list))
    return std::nullopt;
  bool dirty = meta_[head].on_queue == dirty_list;
  unlink(head);
  auto& m = meta_[head];
  allocation result{block_id{head}, m.hash, dirty};
  m.hash = {};
  m.ref_count = 1;
  m.state = block_state::writing;
  return result;
}

void block_pool::ref(block_id id) {
  auto& m = meta_[linked(id)];
  if (m.ref_count++ == 0) {
    KVTIER_CHECK(m.on_queue != 0, "block_pool::ref: unreferenced block missing from the free lists");
    KVTIER_CHECK(!m.hash.empty(), "block_pool::ref: only cached (hashed) free blocks can be revived");
    unlink(index_of(id));
    m.state = block_state::full;
  }
}

bool block_pool::release_to(block_id id, uint8_t list, queue_end end) {
  auto& m = meta_[linked(id)];
  KVTIER_CHECK(m.ref_count > 0, "block_pool::release: block is not referenced (double free)");
  if (--m.ref_count > 0)
    return false;
  m.state = block_state::free;
  push(index_of(id), list, end);
  return true;
}

bool block_pool::release(block_id id, queue_end end) {
  // An unhashed slot holds nothing anyone can find again: reuse it first.
  if (meta_[index_of(id)].hash.empty())
    return release_to(id, clean_list, queue_end::least_recent);
  return release_to(id, dirty_list, end);
}

bool block_pool::release_backed(block_id id, queue_end end) {
  return release_to(id, clean_list, end);
}

void block_pool::release_sequence(std::span<const block_id> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it)
    release(*it);
}

void block_pool::mark_clean(block_id id) {
  auto i = linked(id);
  KVTIER_CHECK(meta_[i].on_queue == dirty_list, "block_pool::mark_clean: block is not on the dirty list");
  unlink(i);
  push(i, clean_list, queue_end::most_recent);
}

void block_pool::mark_dirty(block_id id) {
  auto i = linked(id);
  KVTIER_CHECK(meta_[i].on_queue == clean_list && !meta_[i].hash.empty(),
               "block_pool::mark_dirty: block is not a hashed block on the clean list");
  unlink(i);
  push(i, dirty_list, queue_end::least_recent);
}

void block_pool::evict_next(block_id id) {
  auto i = linked(id);
  auto list = meta_[i].on_queue;
  KVTIER_CHECK(list != 0, "block_pool::evict_next: block is not free");
  unlink(i);
  push(i, list, queue_end::least_recent);
}

void block_pool::forget(block_id id) {
  auto i = linked(id);
  KVTIER_CHECK(meta_[i].ref_count == 0, "block_pool::forget: block is referenced");
  meta_[i].hash = {};
  unlink(i);
  push(i, clean_list, queue_end::least_recent);
}

void block_pool::set_state(block_id id, block_state s) {
  auto i = linked(id);
  KVTIER_CHECK(s != block_state::free || meta_[i].ref_count == 0,
               "block_pool::set_state: a referenced block cannot be free");
  meta_[i].state = s;
}

block_id block_pool::peek_lru() const {
  uint32_t head = meta_[sentinel(clean_list)].next;
  if (head == sentinel(clean_list))
    head = meta_[sentinel(dirty_list)].next;
  if (head == fresh_run())
    return block_id{fresh_};
  return head == sentinel(dirty_list) ? invalid_block : block_id{head};
}

block_id block_pool::first_dirty() const {
  uint32_t head = meta_[sentinel(dirty_list)].next;
  return head == sentinel(dirty_list) ? invalid_block : block_id{head};
}

block_id block_pool::next_free(block_id id) const {
  auto i = index_of(id);
  if (never_used(i))
    return i + 1 < capacity_ ? block_id{i + 1} : after_fresh_run();
  uint32_t next = meta_[i].next;
  if (next == fresh_run())
    return block_id{fresh_};
  return next >= capacity_ ? invalid_block : block_id{next};
}

std::vector<block_id> block_pool::free_queue_order(uint32_t limit) const {
  std::vector<block_id> out;
  for (uint8_t list : {clean_list, dirty_list})
    for (uint32_t i = meta_[sentinel(list)].next; i != sentinel(list) && out.size() < limit; i = meta_[i].next) {
      if (i != fresh_run()) {
        out.push_back(block_id{i});
        continue;
      }
      for (uint32_t j = fresh_; j < capacity_ && out.size() < limit; ++j)
        out.push_back(block_id{j});
    }
  return out;
}

} // namespace kvtier
