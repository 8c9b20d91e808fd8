#pragma once
// The reuse predictor with one set of statistics and one clock for a whole
// stack of tiers: every tier judges blocks by the same learned P(reuse) per
// class (cache/reuse_predictor.hpp), counted over the requests' accesses
// (not over each tier's own stream of demotions and promotions), within the
// characteristic time of the whole stack (the age at which blocks leave its
// last tier). A block keeps its GreedyDual priority when it is demoted, and
// the inflation L rises only when a block leaves the last tier, so an
// exclusive stack ordered this way behaves as one predictor over the summed
// capacity, as an exclusive stack of LRUs is one LRU.
//
// Invariants: as reuse_predictor's, per tier; the shared state is touched
// only through the tiers made together by make_shared_predictor_stack().
// Deterministic; sees only the past.

#include "cache/policy.hpp"
#include "cache/reuse_predictor.hpp"

#include <array>
#include <memory>
#include <vector>

namespace kvtier::cache {

/// One policy per capacity (nullptr where it is 0), top tier first, sharing
/// their statistics, clock and inflation. `params` as reuse_predictor's.
std::array<std::unique_ptr<cache_policy>, 3> make_shared_predictor_stack(std::array<uint64_t, 3> capacities,
                                                                         predictor_params params = {});

} // namespace kvtier::cache
