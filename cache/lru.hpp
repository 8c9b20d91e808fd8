#pragma once
// Least recently used: a hit or an insert makes a block the most recent;
// the least recent one is evicted. The baseline every other policy is
// measured against.

#include "cache/policy.hpp"

#include <list>
#include <unordered_map>

namespace kvtier::cache {

class lru_policy final : public cache_policy {
public:
  explicit lru_policy(uint64_t capacity) : cache_policy(capacity) {}
  std::string_view name() const override { return "lru"; }
  uint64_t size() const override { return order_.size(); }
  bool contains(block_key key) const override { return where_.count(key) > 0; }
  void on_hit(block_key key, const block_context&) override;
  std::optional<block_key> insert(block_key key, const block_context&) override;
  bool erase(block_key key) override;
  std::optional<block_key> evict() override;

private:
  std::list<block_key> order_; // most recent first
  std::unordered_map<block_key, std::list<block_key>::iterator> where_;
};

} // namespace kvtier::cache
