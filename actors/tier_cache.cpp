#include "actors/tier_cache.hpp"

#include <algorithm>

namespace kvtier {

tier_cache::tier_cache(uint32_t capacity, tier_metrics& metrics, slot_placement_kind placement)
    : pool_(capacity),
      placement_(capacity, placement),
      index_(capacity),
      backed_(capacity, 0),
      metrics_(metrics),
      allocated_(metrics.allocated),
      freed_(metrics.freed) {
}

void tier_cache::use_policy(cache::policy_kind kind, double window, block_history& history) {
  policy_ = std::make_unique<tier_policy>(kind, pool_.capacity(), window, pool_, index_, history);
}

void tier_cache::make_room(uint32_t n) {
  if (policy_)
    policy_->make_room(n);
}

void tier_cache::used(block_id id) {
  if (policy_)
    policy_->accessed(id, pool_.hash(id));
}

void tier_cache::unindex(const block_hash& hash) {
  index_.erase(hash);
  if (policy_)
    policy_->dropped(hash);
}

std::optional<tier_cache::taken> tier_cache::allocate() {
  make_room(1);
  auto a = pool_.allocate();
  if (!a) {
    ++metrics_.allocation_failures;
    return std::nullopt;
  }
  // What the block held is gone (evicted, or nothing): its slot is free for
  // the batch that will write it (4).
  placement_.release(a->id);
  taken t{a->id, a->evicted, false};
  if (policy_)
    policy_->reused(a->id);
  if (!a->evicted.empty()) {
    unindex(a->evicted);
    ++metrics_.evictions;
    // Clean-list slots are backed unless their copy below was evicted since
    // (bit cleared); dirty ones may have gained a copy since.
    t.evicted_maybe_sole = a->sole_copy || !backed(a->id);
  }
  set_backed(a->id, false);
  ++allocated_;
  note_usage();
  return t;
}

void tier_cache::free(block_id id, block_pool::queue_end end) {
  bool clean = backed(id) && !pool_.hash(id).empty();
  if (policy_)
    end = policy_->release_end(id, end);
  if (clean ? pool_.release_backed(id, end) : pool_.release(id, end)) {
    ++freed_;
    if (pool_.hash(id).empty())
      placement_.release(id); // holds nothing anyone can find: its slot may join a run
  }
}

void tier_cache::forget(block_id id) {
  pool_.forget(id);
  placement_.release(id);
}

bool tier_cache::pin(block_id id) {
  auto before = pool_.free_count();
  pool_.ref(id);
  if (pool_.free_count() == before)
    return false;
  ++allocated_;
  return true;
}

void tier_cache::note_usage() {
  metrics_.peak_used_blocks = std::max<uint64_t>(metrics_.peak_used_blocks, pool_.used_count());
  metrics_.peak_cached_blocks = std::max<uint64_t>(metrics_.peak_cached_blocks, index_.size());
}

void tier_cache::index_as(block_id id, const block_hash& hash) {
  pool_.set_hash(id, hash);
  index_.insert(hash, id);
  if (policy_)
    policy_->accessed(id, hash);
}

void tier_cache::uncache(block_id id) {
  const auto& h = pool_.hash(id);
  if (!h.empty() && index_.find(h) == id)
    unindex(h);
  pool_.set_hash(id, {});
}

bool tier_cache::adopt(uint32_t slot, const block_hash& hash) {
  block_id id{slot};
  if (slot >= pool_.capacity() || pool_.ref_count(id) != 0 || !pool_.hash(id).empty() || hash.empty() ||
      index_.find(hash) != invalid_block || !placement_.place_at(id, slot))
    return false;
  index_as(id, hash);
  // Off the free queue and back on as a hashed slot: release() files it
  // where a freed cached block of this tier goes.
  pool_.ref(id);
  pool_.release(id);
  return true;
}

} // namespace kvtier
