#include "cache/s3fifo.hpp"

#include <algorithm>

namespace kvtier::cache {

s3fifo_policy::s3fifo_policy(uint64_t capacity)
    : cache_policy(capacity),
      small_target_(std::max<uint64_t>(capacity / 10, 1)),
      ghost_capacity_(capacity - std::min(capacity, std::max<uint64_t>(capacity / 10, 1))) {
}

void s3fifo_policy::on_hit(block_key key, const block_context&) {
  auto& h = hits_.at(key);
  h = static_cast<uint8_t>(std::min(h + 1, 3));
}

void s3fifo_policy::remember(block_key key) {
  if (ghost_capacity_ == 0)
    return;
  if (ghost_.size() >= ghost_capacity_)
    ghost_.pop_back();
  ghost_.push_front(key);
}

block_key s3fifo_policy::evict_one() {
  for (;;) {
    if (small_.size() >= small_target_ || main_.empty()) {
      block_key t = small_.pop_back();
      if (hits_.at(t) > 0) {
        hits_[t] = 0;
        main_.push_front(t);
        continue;
      }
      hits_.erase(t);
      remember(t);
      return t;
    }
    block_key t = main_.pop_back();
    if (auto& h = hits_.at(t); h > 0) {
      --h;
      main_.push_front(t);
      continue;
    }
    hits_.erase(t);
    return t;
  }
}

std::optional<block_key> s3fifo_policy::insert(block_key key, const block_context&) {
  std::optional<block_key> victim;
  if (size() >= capacity())
    victim = evict_one();
  hits_[key] = 0;
  if (ghost_.erase(key))
    main_.push_front(key);
  else
    small_.push_front(key);
  return victim;
}

std::optional<block_key> s3fifo_policy::evict() {
  if (size() == 0)
    return std::nullopt;
  return evict_one();
}

bool s3fifo_policy::erase(block_key key) {
  if (!small_.erase(key) && !main_.erase(key))
    return false;
  hits_.erase(key);
  return true;
}

} // namespace kvtier::cache
