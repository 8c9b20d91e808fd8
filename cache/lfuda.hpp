#pragma once
// LFU with dynamic aging (Arlitt et al., 2000): a block's priority is its hit
// count plus the cache's age L at its last access; the lowest priority is
// evicted (oldest first among equals) and L becomes its priority, so blocks
// that were popular long ago age out.
//
// Invariants: `order_` and `entry_` hold the same keys; L never decreases.

#include "cache/policy.hpp"

#include <set>
#include <tuple>
#include <unordered_map>

namespace kvtier::cache {

class lfuda_policy final : public cache_policy {
public:
  explicit lfuda_policy(uint64_t capacity) : cache_policy(capacity) {}
  std::string_view name() const override { return "lfuda"; }
  uint64_t size() const override { return entry_.size(); }
  bool contains(block_key key) const override { return entry_.count(key) > 0; }
  void on_hit(block_key key, const block_context&) override;
  std::optional<block_key> insert(block_key key, const block_context&) override;
  bool erase(block_key key) override;
  std::optional<block_key> evict() override;
  uint64_t age() const { return age_; }

private:
  struct entry {
    uint64_t priority, stamp, count;
  };
  std::set<std::tuple<uint64_t, uint64_t, block_key>> order_; // (priority, stamp, key), lowest first
  std::unordered_map<block_key, entry> entry_;
  uint64_t age_ = 0;
  uint64_t clock_ = 0;
};

} // namespace kvtier::cache
