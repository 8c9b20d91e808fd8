#include "actors/tier_policy.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier {

std::optional<cache::policy_kind> tier_policy_kind(eviction_policy policy) {
  switch (policy) {
    case eviction_policy::lru:
    case eviction_policy::oracle:
      return std::nullopt;
    case eviction_policy::arc:
      return cache::policy_kind::arc;
    case eviction_policy::s3fifo:
      return cache::policy_kind::s3fifo;
    case eviction_policy::lfuda:
      return cache::policy_kind::lfuda;
    case eviction_policy::predictor:
      return cache::policy_kind::predictor;
  }
  return std::nullopt;
}

namespace {

uint64_t held_by_policy(uint32_t capacity, double window) {
  auto queued = static_cast<uint64_t>(std::floor(double(capacity) * std::clamp(window, 0.0, 1.0)));
  return std::max<uint64_t>(capacity - std::min<uint64_t>(capacity, queued), 1);
}

} // namespace

tier_policy::tier_policy(cache::policy_kind kind, uint32_t capacity, double window, block_pool& pool,
                         const prefix_index& index, block_history& history)
    : policy_(cache::make_policy(kind, held_by_policy(capacity, window))),
      pool_(pool),
      index_(index),
      history_(history),
      chosen_(capacity, 0) {
}

void tier_policy::accessed(block_id id, const block_hash& hash) {
  auto key = history_.key_of(hash);
  const auto& context = history_.context(key);
  chosen_[index_of(id)] = 0;
  if (policy_->contains(key)) {
    policy_->on_hit(key, context);
    return;
  }
  if (!policy_->admit(context)) {
    chosen_[index_of(id)] = 1;
    ++counts_.refused;
    if (pool_.ref_count(id) == 0)
      pool_.evict_next(id);
    return;
  }
  if (auto victim = policy_->insert(key, context))
    evicted(*victim);
}

void tier_policy::dropped(const block_hash& hash) {
  policy_->erase(history_.key_of(hash));
}

bool tier_policy::evicted(cache::block_key key) {
  ++counts_.chosen;
  auto id = index_.find(history_.hash_of(key));
  if (id == invalid_block)
    return false;
  chosen_[index_of(id)] = 1;
  if (pool_.ref_count(id) != 0)
    return false;
  pool_.evict_next(id);
  return true;
}

block_id tier_policy::next_to_allocate(block_id id) const {
  auto next = pool_.next_free(id);
  if (next == invalid_block && !pool_.on_dirty_list(id))
    return pool_.first_dirty();
  return next;
}

void tier_policy::make_room(uint32_t n) {
  n = std::min(n, pool_.free_count());
  uint32_t ready = 0;
  for (auto id = pool_.peek_lru(); id != invalid_block && ready < n; id = next_to_allocate(id)) {
    if (!pool_.hash(id).empty() && !chosen_[index_of(id)])
      break;
    ++ready;
  }
  while (ready < n) {
    auto victim = policy_->evict();
    if (!victim)
      return;
    ready += evicted(*victim) ? 1 : 0;
  }
}

} // namespace kvtier
