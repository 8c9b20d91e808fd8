#pragma once
// One tier's replacement policy over dense block keys: which cached block
// leaves when a new one needs room, and (for a predictor) whether a block is
// worth storing at all. Policies know nothing of other tiers or of slots;
// cache/tier_replay.hpp stacks them into a hierarchy.
//
// Invariants of every policy:
//  (1) size() <= capacity() after every call; insert() on a full policy
//      evicts exactly one resident block and returns it.
//  (2) contains(k) is true exactly for keys inserted and not since evicted
//      or erased; on_hit() and erase() of an absent key are bugs of the caller
//      (on_hit) or no-ops returning false (erase).
//  (3) Deterministic: the same calls give the same evictions.
// Not thread-safe.

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

namespace kvtier::cache {

using block_key = uint32_t;

/// What a block's past shows at the moment it is accessed; policies that
/// predict reuse learn from it, the others ignore it.
struct block_context {
  uint32_t uses_before = 0;    // earlier accesses to this block, over the whole run (any tier)
  uint32_t position = 0;       // index in its request's chain (prefix depth)
  bool request_tail = false;   // the request's last block: the partial, unshared end of a prompt
  bool extends_prefix = false; // its request found a cached prefix beyond its first block
};

class cache_policy {
public:
  explicit cache_policy(uint64_t capacity) : capacity_(capacity) {}
  virtual ~cache_policy() = default;
  cache_policy(const cache_policy&) = delete;
  cache_policy& operator=(const cache_policy&) = delete;

  virtual std::string_view name() const = 0;
  uint64_t capacity() const { return capacity_; }
  virtual uint64_t size() const = 0;
  virtual bool contains(block_key key) const = 0;

  /// A lookup found `key` here. REQUIRES: contains(key).
  virtual void on_hit(block_key key, const block_context& context) = 0;
  /// Whether a block like this is worth storing here at all.
  virtual bool admit(const block_context&) { return true; }
  /// Stores `key`, evicting one block first when full; returns that block.
  /// REQUIRES: !contains(key) and capacity() > 0.
  virtual std::optional<block_key> insert(block_key key, const block_context& context) = 0;
  /// Drops `key` without counting an eviction (it moved to another tier).
  virtual bool erase(block_key key) = 0;
  /// Evicts the block insert() on a full policy would evict, now: how a
  /// caller that owns the slots makes room ahead of an insert. nullopt when
  /// nothing is resident. insert() on a full policy is evict() then insert().
  virtual std::optional<block_key> evict() = 0;

private:
  uint64_t capacity_;
};

// shared_predictor: the reuse predictor with one set of statistics and one
// clock for a whole stack (cache/shared_predictor.hpp); alone it is one tier.
enum class policy_kind : uint8_t { lru, arc, s3fifo, lfuda, predictor, shared_predictor };

std::string_view name_of(policy_kind kind);
std::unique_ptr<cache_policy> make_policy(policy_kind kind, uint64_t capacity);

} // namespace kvtier::cache
