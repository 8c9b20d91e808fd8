#pragma once
// The block moves the block manager has asked for, from staging to landing:
// staged moves wait for take_batches(), which groups them into one batch per
// link and tags it; a batch is in flight until finish() hands its moves back.
// It also keeps the per-tier count of demotions in flight against their cap.
//
// Invariants:
//  (1) Every move is staged once, taken once, and finished once; tags are
//      never reused.
//  (2) demotions_in_flight(t) counts demotions out of `t` that were staged
//      and not yet finished (demotion_started / demotion_landed pair up).
// Moves carry slot numbers only; the references that pin their slots are the
// block manager's (actors/block_manager_state.hpp says which).

#include "runtime/backend.hpp"
#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace kvtier {

/// A batch of block moves over one link, to be submitted as one job.
struct transfer_batch {
  uint64_t tag = 0;
  tier from = tier::hbm;
  tier to = tier::dram;
  std::vector<slot_move> moves;
  std::vector<block_hash> hashes; // per move, for page headers
  bool background = true;         // only demote-ahead moves: nothing waits on them
};

enum class move_kind : uint8_t {
  promote,  // a prefix hit brought up a tier (NVMe hits: two hops, via DRAM)
  demote,   // demote-ahead: a free block's copy made below it
  swap_out, // a preempted sequence's blocks to DRAM
  swap_in,  // ... and back
  spill,    // a long sequence's cold block to DRAM, where its steps then read it (streaming)
};

struct pending_move {
  move_kind kind;
  tier from;
  block_id src;
  tier to;
  block_id dst;
  block_hash hash;
  uint64_t seq;      // owner for swap and spill moves; 0 otherwise
  block_id then_hbm; // NVMe promotions: the HBM slot of the second hop
};

class move_tracker {
public:
  // Demotions in flight per tier. Their sources are pinned while they copy, so
  // an unbounded number would starve allocation on a slow link; 64 blocks keep
  // a PCIe Gen5 link busy for milliseconds, longer than a step.
  static constexpr uint32_t max_demotions_in_flight = 64;

  void stage(const pending_move& move) { staged_.push_back(move); }

  /// Moves staged since the last call, one batch per (from, to) link in
  /// first-seen order; they are in flight from now on.
  std::vector<transfer_batch> take_batches();

  /// The moves of batch `tag`, no longer in flight. REQUIRES: `tag` is in flight.
  std::vector<pending_move> finish(uint64_t tag);

  bool in_flight() const { return !in_flight_.empty(); }
  /// Batches in flight, plus one for the staged moves not yet taken.
  size_t in_flight_count() const { return in_flight_.size() + (staged_.empty() ? 0 : 1); }

  bool demotion_room(tier from) const { return demotions_[index_of(from)] < max_demotions_in_flight; }
  void demotion_started(tier from) { ++demotions_[index_of(from)]; }
  void demotion_landed(tier from) { --demotions_[index_of(from)]; }
  uint32_t demotions_in_flight(tier from) const { return demotions_[index_of(from)]; }

  /// Calls `fn` with every move staged or in flight.
  template <class F>
  void for_each(F&& fn) const {
    for (const auto& m : staged_)
      fn(m);
    for (const auto& [tag, moves] : in_flight_)
      for (const auto& m : moves)
        fn(m);
  }

private:
  std::vector<pending_move> staged_;
  std::unordered_map<uint64_t, std::vector<pending_move>> in_flight_;
  std::array<uint32_t, tier_count> demotions_{};
  uint64_t next_tag_ = 1;
};

} // namespace kvtier
