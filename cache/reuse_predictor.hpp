#pragma once
// The online reuse predictor: keeps the blocks most likely to be used again
// before this tier would push them out, and does not store kinds of blocks
// that almost never are.
//
// Blocks fall into classes by what their past shows: how often the block was
// used before (0, 1, 2, 3-7, 8+), whether it is its request's last block (the
// partial, unshared end of a prompt), and whether its request extended a
// cached prefix (then its new blocks are that request's private suffix).
// For each class the policy learns P(reuse): the share of its blocks used
// again within the tier's characteristic time T, the mean age (in this
// tier's accesses) at which blocks leave it. A ghost history of recent
// accesses, kept whether or not the block stayed, labels every access, so
// what the policy evicts does not bias what it learns.
//
// Eviction is GreedyDual over those probabilities: a block's priority is the
// tier's inflation L at its last access plus its class's P(reuse); the lowest
// priority leaves and L rises to it. Equal probabilities give exactly LRU;
// a block of a rarely reused class leaves soon after it arrives, a block of
// a reused class outlives fresher but likelier-dead ones. Admission: a
// class reused less than `admit_floor` of the time is not stored once the
// evidence for it is `admit_min_events` accesses (decayed), so it is re-learned
// when a workload changes.
//
// Invariants: `order_` and `entry_` hold the same keys; L never decreases;
// the ghost holds each key at most once. Deterministic; sees only the past.

#include "cache/policy.hpp"

#include <array>
#include <deque>
#include <set>
#include <tuple>
#include <unordered_map>

namespace kvtier::cache {

struct predictor_params {
  double decay = 0.9;            // weight kept by old evidence at each period (one T)
  double admit_floor = 0.02;     // classes reused less often than this are not stored
  double admit_min_events = 256; // ... once this much (decayed) evidence says so
};

class reuse_predictor final : public cache_policy {
public:
  static constexpr uint32_t classes = 20;

  explicit reuse_predictor(uint64_t capacity, predictor_params params = {});
  std::string_view name() const override { return "predictor"; }
  uint64_t size() const override { return entry_.size(); }
  bool contains(block_key key) const override { return entry_.count(key) > 0; }
  void on_hit(block_key key, const block_context& context) override;
  bool admit(const block_context& context) override;
  std::optional<block_key> insert(block_key key, const block_context& context) override;
  bool erase(block_key key) override;
  std::optional<block_key> evict() override;

  static uint32_t class_of(const block_context& context);
  /// Learned probability that a block of this class is used again within T.
  double reuse_probability(uint32_t cls) const;
  double characteristic_time() const { return horizon_; }

private:
  struct entry {
    double priority;
    uint64_t stamp;
    uint64_t last;
  };
  struct ghost {
    uint64_t last;
    uint32_t cls;
  };
  void observe(block_key key, uint32_t cls);
  void expire();
  void place(block_key key, uint32_t cls, uint64_t last);
  /// Evicts the lowest priority; `now` is the clock of the access it makes room for.
  std::optional<block_key> evict_at(uint64_t now);

  predictor_params params_;
  std::set<std::tuple<double, uint64_t, block_key>> order_; // (priority, stamp, key), lowest first
  std::unordered_map<block_key, entry> entry_;
  std::unordered_map<block_key, ghost> ghost_;
  std::deque<std::pair<uint64_t, block_key>> ghost_fifo_; // (access time, key), oldest first
  std::array<double, classes> reused_{}, seen_{};
  double inflation_ = 0;
  double horizon_;
  uint64_t clock_ = 0;
  uint64_t next_decay_;
};

} // namespace kvtier::cache
