#pragma once
// Planning of a peer block copy (peer_copy.hpp), shared by the CUDA copier
// and its CPU twin: the request's checks, and its byte ranges coalesced.

#include "kernels/copy/peer_copy.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::copy {

/// A contiguous byte range of the source pool and where it lands in the
/// destination pool (offsets from each pool's base).
struct byte_run {
  uint64_t from_offset = 0;
  uint64_t to_offset = 0;
  uint64_t bytes = 0;
};

/// Empty when `request` is valid; else what is wrong.
std::string check_peer_request(const peer_request& request);

/// Every (move, layer) slice of a valid request, ordered by source offset,
/// with slices contiguous on both sides merged: adjacent slots moved to
/// adjacent slots are one run per layer in layer-major pools, and one run
/// for all their layers in block-major pools.
std::vector<byte_run> peer_runs(const peer_request& request);

/// `runs` cut into pieces of at most `max_bytes` (a multiple of 16): the
/// kernel's units of work, so that long runs spread over many CTAs.
std::vector<byte_run> split_runs(const std::vector<byte_run>& runs, uint64_t max_bytes);

} // namespace kvtier::copy
