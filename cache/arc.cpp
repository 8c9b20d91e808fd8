#include "cache/arc.hpp"

#include <algorithm>

namespace kvtier::cache {

void arc_policy::on_hit(block_key key, const block_context&) {
  if (t1_.erase(key))
    t2_.push_front(key);
  else
    t2_.to_front(key);
}

block_key arc_policy::replace(bool key_in_b2) {
  bool from_t1 = !t1_.empty() && (t1_.size() > p_ || (key_in_b2 && t1_.size() == p_) || t2_.empty());
  if (from_t1) {
    block_key v = t1_.pop_back();
    b1_.push_front(v);
    return v;
  }
  block_key v = t2_.pop_back();
  b2_.push_front(v);
  return v;
}

std::optional<block_key> arc_policy::evict() {
  if (size() == 0)
    return std::nullopt;
  return replace(false);
}

std::optional<block_key> arc_policy::insert(block_key key, const block_context&) {
  const uint64_t c = capacity();
  std::optional<block_key> victim;
  auto full = [&] { return size() >= c; };
  if (b1_.contains(key)) {
    p_ = std::min(c, p_ + std::max<uint64_t>(b2_.size() / b1_.size(), 1));
    b1_.erase(key);
    if (full())
      victim = replace(false);
    t2_.push_front(key);
    return victim;
  }
  if (b2_.contains(key)) {
    uint64_t step = std::max<uint64_t>(b1_.size() / b2_.size(), 1);
    p_ = p_ > step ? p_ - step : 0;
    b2_.erase(key);
    if (full())
      victim = replace(true);
    t2_.push_front(key);
    return victim;
  }
  if (t1_.size() + b1_.size() >= c) {
    if (t1_.size() < c) {
      b1_.pop_back();
      if (full())
        victim = replace(false);
    } else {
      victim = t1_.pop_back(); // T1 fills the cache: its oldest leaves without a ghost
    }
  } else if (t1_.size() + t2_.size() + b1_.size() + b2_.size() >= c) {
    if (t1_.size() + t2_.size() + b1_.size() + b2_.size() >= 2 * c)
      b2_.pop_back();
    if (full())
      victim = replace(false);
  }
  t1_.push_front(key);
  return victim;
}

} // namespace kvtier::cache
