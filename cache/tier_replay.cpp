#include "cache/tier_replay.hpp"

#include "cache/shared_predictor.hpp"

#include <algorithm>
#include <memory>

namespace kvtier::cache {

double replay_result::hit_ratio_through(size_t t) const {
  uint64_t h = 0;
  for (size_t i = 0; i <= t && i < tiers.size(); ++i)
    h += tiers[i].hits;
  return blocks ? double(h) / double(blocks) : 0.0;
}

namespace {

class stack {
public:
  stack(uint64_t key_count, std::array<uint64_t, 3> capacities, policy_kind kind, hierarchy_kind h, replay_result& out)
      : hierarchy_(h), out_(out), last_(key_count) {
    if (kind == policy_kind::shared_predictor)
      tiers_ = make_shared_predictor_stack(capacities);
    for (size_t t = 0; t < 3; ++t) {
      out_.tiers[t].capacity = capacities[t];
      if (capacities[t] > 0 && !tiers_[t])
        tiers_[t] = make_policy(kind, capacities[t]);
    }
  }

  int where(block_key k) const {
    for (int t = 0; t < 3; ++t)
      if (tiers_[t] && tiers_[t]->contains(k))
        return t;
    return -1;
  }

  void use(block_key k, const block_context& ctx) {
    last_[k] = ctx;
    int t = where(k);
    if (t == 0) {
      tiers_[0]->on_hit(k, ctx);
      return;
    }
    if (t > 0) {
      ++out_.tiers[t].promotions;
      tiers_[t]->on_hit(k, ctx); // the policy learns of the hit even when the block leaves
      if (hierarchy_ == hierarchy_kind::exclusive)
        tiers_[t]->erase(k);
    }
    place(0, k);
  }

public:
  bool held_elsewhere(size_t t, block_key k) const {
    for (size_t i = 0; i < 3; ++i)
      if (i != t && tiers_[i] && tiers_[i]->contains(k))
        return true;
    return false;
  }

  int copies(block_key k) const {
    int n = 0;
    for (const auto& p : tiers_)
      n += p && p->contains(k) ? 1 : 0;
    return n;
  }

private:
  bool below_holds(size_t from, block_key k) const {
    for (size_t t = from; t < 3; ++t)
      if (tiers_[t] && tiers_[t]->contains(k))
        return true;
    return false;
  }

  // Stores k in tier t or, if t does not admit it, further down.
  void place(size_t t, block_key k) {
    for (; t < 3; ++t) {
      if (!tiers_[t])
        continue;
      if (tiers_[t]->contains(k))
        return; // inclusive: a copy is here already
      if (!tiers_[t]->admit(last_[k])) {
        ++out_.tiers[t].refused;
        continue;
      }
      if (t > 0)
        ++out_.tiers[t].demotions;
      auto victim = tiers_[t]->insert(k, last_[k]);
      auto& c = out_.tiers[t];
      c.peak_resident = std::max(c.peak_resident, tiers_[t]->size());
      if (victim) {
        ++c.evictions;
        if (!below_holds(t + 1, *victim))
          sink(t + 1, *victim);
        if (!held_elsewhere(t, *victim))
          ++c.lost;
      }
      return;
    }
  }

  // A victim of the tier above t goes down to t or further.
  void sink(size_t t, block_key k) {
    if (t < 3)
      place(t, k);
  }

  hierarchy_kind hierarchy_;
  replay_result& out_;
  std::vector<block_context> last_;
  std::array<std::unique_ptr<cache_policy>, 3> tiers_;
};

} // namespace

replay_result replay_tiers(std::span<const std::vector<block_key>> chains, uint64_t key_count,
                           std::array<uint64_t, 3> capacities, policy_kind policy, hierarchy_kind hierarchy) {
  replay_result r;
  stack s(key_count, capacities, policy, hierarchy, r);
  std::vector<uint32_t> uses(key_count, 0);
  for (const auto& chain : chains) {
    ++r.requests;
    r.blocks += chain.size();
    size_t depth = 0;
    for (block_key k : chain) {
      int t = s.where(k);
      if (t < 0)
        break;
      ++r.tiers[t].hits;
      ++depth;
    }
    // Last block first, as the block manager releases a finished request's
    // blocks: its first block ends most recent, so a deep block never
    // outlives the prefix it needs.
    for (size_t i = chain.size(); i-- > 0;) {
      block_key k = chain[i];
      block_context ctx{uses[k], static_cast<uint32_t>(i), i + 1 == chain.size(), depth > 1};
      s.use(k, ctx);
      ++uses[k];
    }
    for (block_key k : chain)
      r.extra_copies += static_cast<uint64_t>(s.copies(k) - 1 > 0 ? s.copies(k) - 1 : 0);
  }
  return r;
}

} // namespace kvtier::cache
