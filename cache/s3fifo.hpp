#pragma once
// S3-FIFO (Yang et al., SOSP 2023): a small FIFO S (10% of the capacity) that
// new blocks enter, a main FIFO M, and a ghost FIFO G of keys recently
// dropped from S. A block leaving S moves to M if it was hit while in S,
// else it is evicted (its key joins G); a block inserted while in G enters M
// directly. M is a CLOCK: a block at its tail with hits left is reinserted
// with one hit fewer. Hit counters saturate at 3.
//
// Invariants: |S| + |M| <= c; |G| <= |M|'s share of c; a key is in at most
// one of S, M (and G only while in neither).

#include "cache/keyed_list.hpp"
#include "cache/policy.hpp"

#include <unordered_map>

namespace kvtier::cache {

class s3fifo_policy final : public cache_policy {
public:
  explicit s3fifo_policy(uint64_t capacity);
  std::string_view name() const override { return "s3fifo"; }
  uint64_t size() const override { return small_.size() + main_.size(); }
  bool contains(block_key key) const override { return small_.contains(key) || main_.contains(key); }
  void on_hit(block_key key, const block_context&) override;
  std::optional<block_key> insert(block_key key, const block_context&) override;
  bool erase(block_key key) override;
  std::optional<block_key> evict() override;

private:
  block_key evict_one();
  void remember(block_key key);

  uint64_t small_target_;
  uint64_t ghost_capacity_;
  keyed_list small_, main_, ghost_;
  std::unordered_map<block_key, uint8_t> hits_;
};

} // namespace kvtier::cache
