#pragma once
// Builds a request's chain of block hashes from what the request carries:
// external block ids (a trace's hash_ids, each covering `external_block_tokens`
// tokens) mapped onto kvtier's block size, or the token ids themselves.
//
// External ids: kvtier block j covers tokens [j*B, (j+1)*B); its identity is
// the chain of (external id, offset) pairs of every external block it
// overlaps. Equal external id sequences give equal kvtier chains whatever B is.
// The chain has ceil(prompt_tokens / B) entries: a trace's last, partial block
// is reusable when the trace says so (the same id at that position).

#include "runtime/block_hash.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier {

std::vector<block_hash> chain_from_external(std::span<const uint64_t> external_ids, uint32_t external_block_tokens,
                                            uint64_t prompt_tokens, uint32_t block_tokens, tenant_salt salt);

/// Chain of the full blocks of `tokens` (a partial last block is not hashed).
std::vector<block_hash> chain_from_tokens(std::span<const uint32_t> tokens, uint32_t block_tokens, tenant_salt salt);

} // namespace kvtier
