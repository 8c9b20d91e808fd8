#include "cache/lru.hpp"

namespace kvtier::cache {

void lru_policy::on_hit(block_key key, const block_context&) {
  order_.splice(order_.begin(), order_, where_.at(key));
}

std::optional<block_key> lru_policy::insert(block_key key, const block_context&) {
  std::optional<block_key> victim;
  if (order_.size() >= capacity())
    victim = evict();
  order_.push_front(key);
  where_[key] = order_.begin();
  return victim;
}

std::optional<block_key> lru_policy::evict() {
  if (order_.empty())
    return std::nullopt;
  block_key victim = order_.back();
  where_.erase(victim);
  order_.pop_back();
  return victim;
}

bool lru_policy::erase(block_key key) {
  auto it = where_.find(key);
  if (it == where_.end())
    return false;
  order_.erase(it->second);
  where_.erase(it);
  return true;
}

} // namespace kvtier::cache
