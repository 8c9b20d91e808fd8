#include "cache/reuse_predictor.hpp"

#include <algorithm>

namespace kvtier::cache {
namespace {

// Prior for a class with no evidence yet: every block looks alike (LRU).
constexpr double prior_reused = 1, prior_seen = 2;

} // namespace

reuse_predictor::reuse_predictor(uint64_t capacity, predictor_params params)
    : cache_policy(capacity), params_(params), horizon_(static_cast<double>(capacity)), next_decay_(capacity) {
}

uint32_t reuse_predictor::class_of(const block_context& c) {
  uint32_t uses = c.uses_before < 3 ? c.uses_before : c.uses_before < 8 ? 3 : 4;
  return uses * 4 + (c.request_tail ? 2 : 0) + (c.extends_prefix ? 1 : 0);
}

double reuse_predictor::reuse_probability(uint32_t cls) const {
  return (reused_[cls] + prior_reused) / (seen_[cls] + prior_seen);
}

void reuse_predictor::expire() {
  // Accesses older than T that saw no reuse count as not reused in time.
  while (!ghost_fifo_.empty() && static_cast<double>(clock_ - ghost_fifo_.front().first) > horizon_) {
    auto [t, key] = ghost_fifo_.front();
    ghost_fifo_.pop_front();
    auto it = ghost_.find(key);
    if (it != ghost_.end() && it->second.last == t) {
      seen_[it->second.cls] += 1;
      ghost_.erase(it);
    }
  }
  if (clock_ >= next_decay_) {
    for (uint32_t c = 0; c < classes; ++c) {
      reused_[c] *= params_.decay;
      seen_[c] *= params_.decay;
    }
    next_decay_ = clock_ + std::max<uint64_t>(static_cast<uint64_t>(horizon_), 1);
  }
}

void reuse_predictor::observe(block_key key, uint32_t cls) {
  ++clock_;
  expire();
  auto [it, fresh] = ghost_.try_emplace(key, ghost{clock_, cls});
  if (!fresh) {
    // Used again within T (older entries were expired above).
    seen_[it->second.cls] += 1;
    reused_[it->second.cls] += 1;
    it->second = ghost{clock_, cls};
  }
  ghost_fifo_.emplace_back(clock_, key);
}

void reuse_predictor::place(block_key key, uint32_t cls, uint64_t last) {
  entry e{inflation_ + reuse_probability(cls), clock_, last};
  entry_[key] = e;
  order_.insert({e.priority, e.stamp, key});
}

void reuse_predictor::on_hit(block_key key, const block_context& context) {
  auto cls = class_of(context);
  observe(key, cls);
  auto it = entry_.find(key);
  order_.erase({it->second.priority, it->second.stamp, key});
  entry_.erase(it);
  place(key, cls, clock_);
}

bool reuse_predictor::admit(const block_context& context) {
  auto c = class_of(context);
  return seen_[c] < params_.admit_min_events || reuse_probability(c) >= params_.admit_floor;
}

std::optional<block_key> reuse_predictor::insert(block_key key, const block_context& context) {
  auto cls = class_of(context);
  observe(key, cls);
  std::optional<block_key> victim;
  if (entry_.size() >= capacity())
    victim = evict_at(clock_);
  place(key, cls, clock_);
  return victim;
}

std::optional<block_key> reuse_predictor::evict() {
  // Room for the access that comes next, which advances the clock by one.
  return evict_at(clock_ + 1);
}

std::optional<block_key> reuse_predictor::evict_at(uint64_t now) {
  if (order_.empty())
    return std::nullopt;
  auto [priority, stamp, v] = *order_.begin();
  order_.erase(order_.begin());
  // T follows the age at which blocks leave: a reuse later than that is
  // one this tier could not have served.
  double age = static_cast<double>(now - entry_.at(v).last);
  horizon_ = std::max(1.0, 0.999 * horizon_ + 0.001 * age);
  entry_.erase(v);
  inflation_ = std::max(inflation_, priority);
  return v;
}

bool reuse_predictor::erase(block_key key) {
  auto it = entry_.find(key);
  if (it == entry_.end())
    return false;
  order_.erase({it->second.priority, it->second.stamp, key});
  entry_.erase(it);
  return true;
}

} // namespace kvtier::cache
