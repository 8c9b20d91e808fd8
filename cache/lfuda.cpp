#include "cache/lfuda.hpp"

namespace kvtier::cache {

void lfuda_policy::on_hit(block_key key, const block_context&) {
  auto& e = entry_.at(key);
  order_.erase({e.priority, e.stamp, key});
  ++e.count;
  e.priority = e.count + age_;
  e.stamp = ++clock_;
  order_.insert({e.priority, e.stamp, key});
}

std::optional<block_key> lfuda_policy::insert(block_key key, const block_context&) {
  std::optional<block_key> victim;
  if (entry_.size() >= capacity())
    victim = evict();
  entry e{1 + age_, ++clock_, 1};
  entry_.emplace(key, e);
  order_.insert({e.priority, e.stamp, key});
  return victim;
}

std::optional<block_key> lfuda_policy::evict() {
  if (order_.empty())
    return std::nullopt;
  auto [priority, stamp, v] = *order_.begin();
  order_.erase(order_.begin());
  entry_.erase(v);
  age_ = priority;
  return v;
}

bool lfuda_policy::erase(block_key key) {
  auto it = entry_.find(key);
  if (it == entry_.end())
    return false;
  order_.erase({it->second.priority, it->second.stamp, key});
  entry_.erase(it);
  return true;
}

} // namespace kvtier::cache
