#pragma once
// Learning what Belady keeps: an online policy trained on the decisions the
// optimal policy would have made over the recent past (after Hawkeye, Jain &
// Lin, ISCA 2016; this is its own code).
//
// OPTgen. Over a sliding history of the last `history` x capacity accesses,
// an occupancy count per access time says how many blocks Belady (with this
// capacity) holds across that moment. When a block is used again, Belady
// would have hit it exactly when every count between its two uses is below
// the capacity (it then holds the block across them, and they rise by one).
// The hit of interest is a prefix hit, so a request's blocks are judged in
// chain order and a block counts as kept only if every block before it in
// its chain was kept too; a block not used again within the history was not
// worth keeping. Each verdict labels the features of the block's previous
// access "OPT-friendly" or "OPT-averse".
//
// Features (what an access's past shows): the block's use count bucket, its
// request's last block, whether its request extended a cached prefix, its
// prefix depth (log2 bucket). Per feature combination a decayed friendly-rate
// is learned.
//
// Eviction: blocks whose last access was predicted averse go first (oldest
// first), then the least recent friendly one. Admission: a block predicted
// averse with confidence (friendly-rate under `admit_floor` over at least
// `admit_min_events` labels) is not stored.
//
// A stack of these (make_optgen_stack) shares one OPTgen, one predictor and
// one clock over the requests' accesses, with the stack's summed capacity: a
// block keeps its label when it is demoted, so an exclusive stack behaves as
// one such policy over its summed memory (as a stack of LRUs is one LRU).
//
// Experimental: `variant` and the OG_HISTORY, OG_DECAY, OG_THRESH and
// OG_VARIANT environment variables (read by make_optgen_stack) select the
// designs measured in docs/cache_policy.md ("Not done"): variant & 15 the
// features (0 use class x depth, 2 use class x turn x pace, 3 all four);
// & 16 GreedyDual over the friendly-rate instead of averse-first; & 32 the
// threshold as a multiple of the stack-wide friendly-rate; & 64 friendly
// blocks older than the history go first; & 128 a friendly block the stack
// gives up trains its features averse.
//
// Invariants: each tier's averse and friendly lists hold exactly its
// resident keys, each key in one of them; every occupancy count stays at or
// below the capacity. Deterministic; sees only the past.

#include "cache/policy.hpp"

#include <array>
#include <memory>

namespace kvtier::cache {

struct optgen_params {
  uint32_t history = 8;            // OPTgen's history, in multiples of the (summed) capacity
  double decay = 0.9;              // weight old labels keep at every history / 8 accesses
  double friendly_threshold = 0.5; // predicted friendly at or above this friendly-rate
  double admit_floor = 0.05;       // refused below this friendly-rate ...
  double admit_min_events = 256;   // ... once this many (decayed) labels say so
  uint32_t variant = 0;            // experiment switch
};

/// One policy per capacity (nullptr where it is 0), top tier first, sharing
/// OPTgen, the predictor and the clock.
std::array<std::unique_ptr<cache_policy>, 3> make_optgen_stack(std::array<uint64_t, 3> capacities,
                                                               optgen_params params = {});

} // namespace kvtier::cache
