#pragma once
// Adaptive Replacement Cache (Megiddo and Modha, FAST 2003): a recency list
// T1 (seen once) and a frequency list T2 (seen again while cached), each with
// a ghost list of keys it evicted (B1, B2). A hit in a ghost list moves the
// target size p of T1 toward the list that would have kept it.
//
// Invariants: |T1| + |T2| <= c; |T1| + |B1| <= c; |T1| + |T2| + |B1| + |B2| <= 2c;
// 0 <= p <= c; a key is in at most one of the four lists.

#include "cache/keyed_list.hpp"
#include "cache/policy.hpp"

namespace kvtier::cache {

class arc_policy final : public cache_policy {
public:
  explicit arc_policy(uint64_t capacity) : cache_policy(capacity) {}
  std::string_view name() const override { return "arc"; }
  uint64_t size() const override { return t1_.size() + t2_.size(); }
  bool contains(block_key key) const override { return t1_.contains(key) || t2_.contains(key); }
  void on_hit(block_key key, const block_context&) override;
  std::optional<block_key> insert(block_key key, const block_context&) override;
  bool erase(block_key key) override { return t1_.erase(key) || t2_.erase(key); }
  /// REPLACE as for a key in neither ghost list.
  std::optional<block_key> evict() override;
  uint64_t target_t1() const { return p_; }

private:
  /// Evicts from T1 or T2 into its ghost list, as p says; returns the victim.
  block_key replace(bool key_in_b2);

  keyed_list t1_, t2_, b1_, b2_;
  uint64_t p_ = 0;
};

} // namespace kvtier::cache
