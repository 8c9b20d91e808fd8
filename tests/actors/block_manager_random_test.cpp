// A seeded random walk through block_manager_state: admissions of prompts
// that share prefixes, growth, release, preemption (swap and recompute),
// swap-in, compaction, demote-ahead, and transfers that land in any order
// and fail now and then. After every step the block manager must account for
// every slot and every reference (check_conservation) and no copy may have
// read a slot that was itself still being written. Now and then each resident
// sequence's table update is taken and applied to a copy of its table, which
// must then equal the table: updates name every entry that changed.

#include "actors/block_manager_state.hpp"
#include "runtime/config_names.hpp"
#include "runtime/prefix_chain.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

using namespace kvtier;

namespace {

constexpr uint32_t block_tokens = 4;

class random_walk {
public:
  random_walk(uint64_t seed, const block_manager_options& options) : rng_(seed), bm_(options, &metrics_) {}

  // Runs `steps` random operations; returns the first broken invariant with
  // the step and operation that broke it, or "".
  std::string run(uint32_t steps) {
    for (uint32_t i = 0; i < steps; ++i) {
      const char* op = step();
      if (auto broken = check(); !broken.empty())
        return "step " + std::to_string(i) + " (" + op + "): " + broken;
      if (auto broken = check_tables(); !broken.empty())
        return "step " + std::to_string(i) + " (" + op + "): " + broken;
    }
    // Settle: land everything, end every sequence; nothing may stay allocated.
    while (!flying_.empty() || bm_.transfers_in_flight_count() > 0) {
      take();
      if (!flying_.empty())
        land(0, true);
    }
    for (auto seq : live_)
      bm_.release(seq);
    live_.clear();
    if (auto broken = check(); !broken.empty())
      return "settled: " + broken;
    for (auto t : local_tiers) {
      const auto& m = metrics_.tiers[index_of(t)];
      if (m.capacity_blocks > 0 && (m.allocated != m.freed || bm_.pool(t).used_count() != 0))
        return std::string("settled: ") + std::string(name_of(t)) + " still holds blocks";
    }
    return {};
  }

  const block_metrics& metrics() const { return metrics_; }

private:
  uint32_t below(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  // Prompts are drawn from a few documents: a shared head of a random length,
  // then blocks of their own, so prefixes are shared, diverge, and repeat.
  std::vector<block_hash> prompt_chain() {
    std::vector<uint64_t> ids;
    uint64_t document = below(4);
    uint32_t shared = below(6);
    uint32_t own = below(4);
    for (uint32_t i = 0; i < shared; ++i)
      ids.push_back(document * 100 + i);
    for (uint32_t i = 0; i < own; ++i)
      ids.push_back(1000 + below(12) * 10 + i);
    if (ids.empty())
      ids.push_back(document * 100);
    return chain_from_external(ids, block_tokens, block_tokens * ids.size(), block_tokens,
                               tenant_salt{below(5) == 0 ? 1u : 0u});
  }

  // A registered sequence matching `want`, or 0 when there is none.
  template <class Pred>
  uint64_t pick(Pred want) {
    std::vector<uint64_t> fit;
    for (auto seq : live_)
      if (want(seq))
        fit.push_back(seq);
    return fit.empty() ? 0 : fit[below(static_cast<uint32_t>(fit.size()))];
  }

  bool resident(uint64_t seq) const { return !bm_.swapped(seq) && bm_.ready(seq); }

  void forget(uint64_t seq) {
    live_.erase(std::find(live_.begin(), live_.end(), seq));
    mirrors_.erase(seq);
  }

  // Applies the table updates of some resident sequences to their copies.
  std::string check_tables() {
    if (!chance(0.4))
      return {};
    for (auto seq : live_) {
      if (bm_.swapped(seq) || !chance(0.7))
        continue;
      auto& mirror = mirrors_[seq];
      auto update = bm_.take_table_update(seq);
      if (update.from > mirror.size())
        return "sequence " + std::to_string(seq) + ": a table update starts past the table taken so far";
      mirror.resize(update.from);
      mirror.insert(mirror.end(), update.entries.begin(), update.entries.end());
      if (mirror != bm_.hbm_slots(seq))
        return "sequence " + std::to_string(seq) + ": its table updates do not add up to its table";
      if (!bm_.take_table_update(seq).entries.empty())
        return "sequence " + std::to_string(seq) + ": a second update with nothing changed is not empty";
    }
    return {};
  }

  void take() {
    for (auto& b : bm_.take_transfers())
      flying_.push_back(std::move(b));
  }

  void land(size_t i, bool ok) {
    auto tag = flying_[i].tag;
    flying_.erase(flying_.begin() + static_cast<std::ptrdiff_t>(i));
    bm_.on_transfer_done(tag, ok);
  }

  const char* step() {
    switch (below(10)) {
      case 0:
      case 1: {
        auto chain = prompt_chain();
        uint64_t prompt = chain.size() * block_tokens - below(block_tokens);
        uint64_t seq = next_seq_++;
        auto a = bm_.admit(seq, std::move(chain), prompt);
        if (a.status == admit_status::no_room)
          return "admit (no room)";
        live_.push_back(seq);
        if (a.status == admit_status::ready && prompt > a.hit_tokens)
          bm_.grow(seq, static_cast<uint32_t>(prompt - a.hit_tokens));
        return "admit";
      }
      case 2: {
        auto seq = pick([&](uint64_t s) { return resident(s); });
        if (seq)
          bm_.grow(seq, 1 + below(2 * block_tokens));
        return "grow";
      }
      case 3: {
        auto seq = pick([&](uint64_t s) { return bm_.ready(s); });
        if (seq) {
          bm_.release(seq);
          forget(seq);
        }
        return "release";
      }
      case 4: {
        auto seq = pick([&](uint64_t s) { return resident(s); });
        if (seq &&
            bm_.preempt(seq, chance(0.7) ? preempt_mode::swap : preempt_mode::recompute) == preempt_mode::recompute)
          forget(seq);
        return "preempt";
      }
      case 5: {
        auto seq = pick([&](uint64_t s) { return bm_.swapped(s); });
        if (seq)
          bm_.swap_in(seq);
        return "swap_in";
      }
      case 6: {
        auto seq = pick([&](uint64_t s) { return resident(s); });
        if (seq) {
          // Any full blocks before the last: a random subset, ascending.
          std::vector<uint32_t> drop;
          for (uint32_t b = 0; b + 1 < bm_.hbm_block_count(seq); ++b)
            if (chance(0.3))
              drop.push_back(b);
          auto slots = bm_.hbm_slots(seq);
          std::vector<uint32_t> expected;
          for (auto b : drop)
            expected.push_back(slots[b]);
          auto before = bm_.tokens(seq);
          auto done = bm_.compact(seq, drop, expected);
          if (!done.applied || bm_.tokens(seq) != before)
            return "compact (table changed or positions lost)";
        }
        return "compact";
      }
      case 7:
        bm_.demote_ahead();
        return "demote_ahead";
      case 8:
        take();
        return "take_transfers";
      default:
        if (flying_.empty())
          return "land (nothing in flight)";
        land(below(static_cast<uint32_t>(flying_.size())), !chance(0.15));
        return "land";
    }
  }

  std::string check() const {
    if (auto broken = bm_.check_conservation(); !broken.empty())
      return broken;
    if (metrics_.reads_while_moving != 0)
      return "a copy read a slot that was still being written";
    // A copy in flight writes into a slot nobody else can reuse meanwhile.
    for (const auto& b : flying_)
      for (const auto& m : b.moves) {
        const auto& pool = bm_.pool(b.to);
        block_id dst = bm_.block_in(b.to, m.to_slot);
        if (dst == invalid_block || pool.ref_count(dst) == 0 || pool.state(dst) != block_state::moving)
          return std::string(name_of(b.to)) + " slot " + std::to_string(m.to_slot) +
              ": destination of a copy in flight is not pinned and moving";
      }
    for (auto t : local_tiers) {
      if (metrics_.tiers[index_of(t)].capacity_blocks == 0)
        continue;
      const auto& pool = bm_.pool(t);
      for (auto id : pool.free_queue_order())
        if (pool.on_dirty_list(id) && pool.hash(id).empty())
          return std::string(name_of(t)) + " slot " + std::to_string(index_of(id)) + ": unhashed on the dirty list";
    }
    return {};
  }

  std::mt19937_64 rng_;
  block_metrics metrics_;
  block_manager_state bm_;
  std::vector<uint64_t> live_;
  std::map<uint64_t, std::vector<uint32_t>> mirrors_; // tables as their updates built them
  std::vector<transfer_batch> flying_;
  uint64_t next_seq_ = 1;
};

block_manager_options small_tiers(uint32_t nvme_blocks) {
  block_manager_options o;
  o.hbm_blocks = 24;
  o.dram_blocks = 16;
  o.nvme_blocks = nvme_blocks;
  o.block_tokens = block_tokens;
  o.demote_watermark = 0.5;
  return o;
}

constexpr uint32_t steps_per_seed = 10000;

} // namespace

TEST(block_manager_random, conserves_blocks_with_dram_and_nvme) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    random_walk walk(seed, small_tiers(32));
    EXPECT_EQ(walk.run(steps_per_seed), "") << "seed " << seed;
    // The walk reached every kind of move, and failures among them.
    EXPECT_GT(walk.metrics().tiers[index_of(tier::nvme)].promotions, 0u) << "seed " << seed;
    EXPECT_GT(walk.metrics().tiers[index_of(tier::dram)].promotions, 0u) << "seed " << seed;
    EXPECT_GT(walk.metrics().swapped_in_blocks, 0u) << "seed " << seed;
    EXPECT_GT(walk.metrics().failed_transfers, 0u) << "seed " << seed;
  }
}

TEST(block_manager_random, conserves_blocks_without_nvme) {
  for (uint64_t seed = 101; seed <= 104; ++seed) {
    random_walk walk(seed, small_tiers(0));
    EXPECT_EQ(walk.run(steps_per_seed), "") << "seed " << seed;
  }
}

// Exclusive: dropping the copy below when a promotion lands (or an HBM hit
// finds a block demote-ahead copied down) never frees a slot that a move or
// a sequence still holds, whatever lands, fails or is swapped meanwhile.
TEST(block_manager_random, exclusive_conserves_blocks_and_drops_copies_below) {
  for (uint64_t seed = 201; seed <= 204; ++seed) {
    auto o = small_tiers(32);
    o.exclusive = true;
    random_walk walk(seed, o);
    EXPECT_EQ(walk.run(steps_per_seed), "") << "seed " << seed;
    const auto& t = walk.metrics().tiers;
    EXPECT_GT(t[index_of(tier::dram)].copies_dropped, 0u) << "seed " << seed;
    EXPECT_GT(t[index_of(tier::nvme)].copies_dropped, 0u) << "seed " << seed;
  }
}

// A cache policy orders the free queues: whatever it evicts or refuses, and
// however its victims are pinned, moved or failed meanwhile, every slot is
// still accounted for in both hierarchies.
TEST(block_manager_random, policies_conserve_blocks) {
  uint64_t seed = 301;
  for (auto policy : {eviction_policy::s3fifo, eviction_policy::predictor, eviction_policy::arc})
    for (bool exclusive : {false, true}) {
      auto o = small_tiers(32);
      o.exclusive = exclusive;
      o.policy = policy;
      random_walk walk(seed, o);
      EXPECT_EQ(walk.run(steps_per_seed / 4), "") << "seed " << seed << " policy " << name_of(policy);
      ++seed;
    }
}
