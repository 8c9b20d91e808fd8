#pragma once
// An ordered list of distinct keys with O(1) membership, push at the front,
// pop at the back and removal anywhere: the queues ARC and S3-FIFO are made of.
// Invariant: every key appears at most once, and `where_` indexes exactly the
// keys in `order_`.

#include "cache/policy.hpp"

#include <list>
#include <optional>
#include <unordered_map>

namespace kvtier::cache {

class keyed_list {
public:
  uint64_t size() const { return order_.size(); }
  bool empty() const { return order_.empty(); }
  bool contains(block_key key) const { return where_.count(key) > 0; }
  void push_front(block_key key) {
    order_.push_front(key);
    where_[key] = order_.begin();
  }
  /// Moves a member to the front. REQUIRES: contains(key).
  void to_front(block_key key) { order_.splice(order_.begin(), order_, where_.at(key)); }
  block_key back() const { return order_.back(); }
  block_key pop_back() {
    block_key key = order_.back();
    where_.erase(key);
    order_.pop_back();
    return key;
  }
  bool erase(block_key key) {
    auto it = where_.find(key);
    if (it == where_.end())
      return false;
    order_.erase(it->second);
    where_.erase(it);
    return true;
  }

private:
  std::list<block_key> order_; // front: newest
  std::unordered_map<block_key, std::list<block_key>::iterator> where_;
};

} // namespace kvtier::cache
