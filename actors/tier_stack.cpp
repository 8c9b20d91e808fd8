#include "actors/tier_stack.hpp"

#include <algorithm>

namespace kvtier {

tier_stack::tier_stack(std::array<uint32_t, 3> capacities, block_metrics& metrics, tier_stack_policy policy,
                       slot_placement_kind below_hbm) {
  if (policy.kind)
    history_ = std::make_unique<block_history>();
  for (size_t i = 0; i < local_tiers.size(); ++i) {
    if (capacities[i] > 0) {
      tiers_[i] =
          std::make_unique<tier_cache>(capacities[i], metrics.tiers[i],
                                       local_tiers[i] == tier::hbm ? slot_placement_kind::eviction_order : below_hbm);
      if (policy.kind)
        tiers_[i]->use_policy(*policy.kind, policy.window, *history_);
    }
    metrics.tiers[i].capacity_blocks = capacities[i];
  }
}

void tier_stack::note_request(std::span<const block_hash> chain, size_t hit_blocks) {
  if (!history_)
    return;
  history_->note_request(chain, hit_blocks);
  for (size_t i = std::min(hit_blocks, chain.size()); i-- > 0;)
    for (const auto& c : tiers_)
      if (c) {
        if (auto id = c->find(chain[i]); id != invalid_block) {
          c->used(id);
          break;
        }
      }
}

std::optional<block_id> tier_stack::allocate(tier t) {
  auto a = at(t).allocate();
  if (!a)
    return std::nullopt;
  if (!a->evicted.empty()) {
    if (a->evicted_maybe_sole && !held_elsewhere(t, a->evicted))
      ++at(t).metrics().evictions_lost;
    if (t != tier::hbm)
      unback_above(t, a->evicted);
  }
  // Allocations come in runs (a demote-ahead walk, a sequence's blocks): the
  // next one evicts the slot now at the head, whose lookups start loading here.
  if (auto next = at(t).pool().peek_lru(); next != invalid_block) {
    const auto& h = at(t).pool().hash(next);
    if (!h.empty())
      prefetch(h);
  }
  return a->id;
}

void tier_stack::prefetch(const block_hash& hash) const {
  for (const auto& c : tiers_)
    if (c)
      c->prefetch(hash);
}

void tier_stack::count_eviction(tier t, const block_hash& hash, bool maybe_sole) {
  auto& c = at(t);
  c.unindex(hash); // also drops it from the tier's policy
  ++c.metrics().evictions;
  if (maybe_sole && !held_elsewhere(t, hash))
    ++c.metrics().evictions_lost;
}

block_id tier_stack::find(tier t, const block_hash& hash) const {
  return enabled(t) ? at(t).find(hash) : invalid_block;
}

bool tier_stack::backed_below(tier t, const block_hash& hash) const {
  for (auto lower = index_of(t) + 1; lower < local_tiers.size(); ++lower)
    if (tiers_[lower] && tiers_[lower]->find(hash) != invalid_block)
      return true;
  return false;
}

bool tier_stack::held_elsewhere(tier t, const block_hash& hash) const {
  for (size_t other = 0; other < local_tiers.size(); ++other)
    if (other != index_of(t) && tiers_[other] && tiers_[other]->find(hash) != invalid_block)
      return true;
  return false;
}

bool tier_stack::slot_backed(tier t, block_id id) {
  auto& c = at(t);
  if (!c.backed(id)) {
    const auto& h = c.pool().hash(id);
    c.set_backed(id, !h.empty() && backed_below(t, h));
  }
  return c.backed(id);
}

void tier_stack::unback_above(tier t, const block_hash& hash) {
  // Only the nearest tier above that still holds the block can lose its
  // backing: every tier above that one stays backed by it.
  for (size_t upper = index_of(t); upper-- > 0;) {
    if (!tiers_[upper])
      continue;
    auto id = tiers_[upper]->find(hash);
    if (id == invalid_block)
      continue;
    // The lower tier judged this block its coldest: the upper copy stays where
    // it is (a free one on the clean list, evicted early) and is not demoted
    // again, which would only push out another cold block below — with a lower
    // tier smaller than the one above, forever.
    if (tiers_[upper]->backed(id) && !backed_below(t, hash))
      tiers_[upper]->set_backed(id, false);
    return;
  }
}

} // namespace kvtier
