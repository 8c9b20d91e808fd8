#include "cache/shared_predictor.hpp"

#include <algorithm>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>

namespace kvtier::cache {
namespace {

constexpr double prior_reused = 1, prior_seen = 2; // as reuse_predictor's: no evidence looks like LRU

struct entry {
  double priority;
  uint64_t stamp;
  uint64_t last; // clock of the block's last request access
};

// What every tier of the stack shares.
struct shared_state {
  predictor_params params;
  std::array<double, reuse_predictor::classes> reused{}, seen{};
  std::unordered_map<block_key, std::pair<uint64_t, uint32_t>> ghost; // key -> (access time, class)
  std::deque<std::pair<uint64_t, block_key>> ghost_fifo;
  std::unordered_map<block_key, entry> entries; // the block's priority wherever in the stack it is
  double inflation = 0;
  double horizon;
  uint64_t clock = 0;
  uint64_t next_decay;
  block_key accessed = 0; // the block of the latest access (at `clock`)

  explicit shared_state(predictor_params p, uint64_t total)
      : params(p), horizon(static_cast<double>(std::max<uint64_t>(total, 1))), next_decay(total) {}

  double probability(uint32_t cls) const { return (reused[cls] + prior_reused) / (seen[cls] + prior_seen); }

  void expire() {
    while (!ghost_fifo.empty() && static_cast<double>(clock - ghost_fifo.front().first) > horizon) {
      auto [t, key] = ghost_fifo.front();
      ghost_fifo.pop_front();
      auto it = ghost.find(key);
      if (it != ghost.end() && it->second.first == t) {
        seen[it->second.second] += 1;
        ghost.erase(it);
      }
    }
    if (clock >= next_decay) {
      for (uint32_t c = 0; c < reuse_predictor::classes; ++c) {
        reused[c] *= params.decay;
        seen[c] *= params.decay;
      }
      next_decay = clock + std::max<uint64_t>(static_cast<uint64_t>(horizon), 1);
    }
  }

  // A request accessed `key`: labels its previous access; returns its class.
  uint32_t observe(block_key key, const block_context& context) {
    auto cls = reuse_predictor::class_of(context);
    ++clock;
    expire();
    auto [it, fresh] = ghost.try_emplace(key, clock, cls);
    if (!fresh) {
      seen[it->second.second] += 1;
      reused[it->second.second] += 1;
      it->second = {clock, cls};
    }
    ghost_fifo.emplace_back(clock, key);
    accessed = key;
    return cls;
  }

  // The block's priority from its class, at the current inflation.
  const entry& rank(block_key key, uint32_t cls) {
    return entries[key] = entry{inflation + probability(cls), clock, clock};
  }
};

class shared_predictor_tier final : public cache_policy {
public:
  shared_predictor_tier(uint64_t capacity, std::shared_ptr<shared_state> state, bool top, bool bottom)
      : cache_policy(capacity), state_(std::move(state)), top_(top), bottom_(bottom) {}

  std::string_view name() const override { return "predictor-shared"; }
  uint64_t size() const override { return here_.size(); }
  bool contains(block_key key) const override { return here_.count(key) > 0; }

  void on_hit(block_key key, const block_context& context) override {
    remove(key);
    place(key, state_->rank(key, state_->observe(key, context)));
  }

  bool admit(const block_context& context) override {
    auto c = reuse_predictor::class_of(context);
    return state_->seen[c] < state_->params.admit_min_events || state_->probability(c) >= state_->params.admit_floor;
  }

  std::optional<block_key> insert(block_key key, const block_context& context) override {
    // A new block or a promotion into the top tier is a request access
    // (a promotion's was counted by the hit below it); a block arriving
    // lower comes from above and keeps its priority.
    auto known = state_->entries.find(key);
    bool promoted = state_->clock > 0 && state_->accessed == key; // its hit below was this access
    bool carried = known != state_->entries.end() && (!top_ || promoted);
    std::optional<entry> e;
    std::optional<uint32_t> cls;
    if (carried)
      e = known->second;
    else
      cls = state_->observe(key, context);
    std::optional<block_key> victim;
    if (here_.size() >= capacity())
      victim = evict();
    // As in reuse_predictor: a new block is ranked after the eviction raised L.
    place(key, carried ? *e : state_->rank(key, *cls));
    return victim;
  }

  bool erase(block_key key) override { return remove(key); }

  std::optional<block_key> evict() override {
    if (order_.empty())
      return std::nullopt;
    auto [priority, stamp, v] = *order_.begin();
    if (bottom_) {
      // Leaving the stack: T follows the age at which blocks go, and L rises.
      auto& s = *state_;
      double age = static_cast<double>(s.clock - here_.at(v).last);
      s.horizon = std::max(1.0, 0.999 * s.horizon + 0.001 * age);
      s.inflation = std::max(s.inflation, priority);
      s.entries.erase(v);
    }
    remove(v);
    return v;
  }

private:
  void place(block_key key, const entry& e) {
    here_[key] = e;
    order_.insert({e.priority, e.stamp, key});
  }
  bool remove(block_key key) {
    auto it = here_.find(key);
    if (it == here_.end())
      return false;
    order_.erase({it->second.priority, it->second.stamp, key});
    here_.erase(it);
    return true;
  }

  std::shared_ptr<shared_state> state_;
  bool top_, bottom_;
  std::set<std::tuple<double, uint64_t, block_key>> order_;
  std::unordered_map<block_key, entry> here_;
};

} // namespace

std::array<std::unique_ptr<cache_policy>, 3> make_shared_predictor_stack(std::array<uint64_t, 3> capacities,
                                                                         predictor_params params) {
  uint64_t total = capacities[0] + capacities[1] + capacities[2];
  auto state = std::make_shared<shared_state>(params, total);
  size_t top = 3, bottom = 0;
  for (size_t t = 0; t < 3; ++t)
    if (capacities[t] > 0) {
      top = std::min(top, t);
      bottom = t;
    }
  std::array<std::unique_ptr<cache_policy>, 3> tiers;
  for (size_t t = 0; t < 3; ++t)
    if (capacities[t] > 0)
      tiers[t] = std::make_unique<shared_predictor_tier>(capacities[t], state, t == top, t == bottom);
  return tiers;
}

} // namespace kvtier::cache
