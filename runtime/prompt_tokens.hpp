#pragma once
// Token ids for requests that carry none (trace replay with a real model).
//
// Token p of a prompt whose trace gives block ids is a hash of (the id of the
// trace block covering p, p's offset in it), below `vocab_size`: requests
// that share trace blocks share tokens, so shared prefixes stay shared
// prefixes. Without block ids the request id stands in for every block, so
// no two requests share a token sequence by construction.

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier {

/// REQUIRES: vocab_size > 0, external_block_tokens > 0 when ids are given.
std::vector<uint32_t> tokens_from_external(std::span<const uint64_t> external_ids, uint32_t external_block_tokens,
                                           uint64_t prompt_tokens, uint32_t vocab_size);

/// REQUIRES: vocab_size > 0.
std::vector<uint32_t> tokens_from_request_id(uint64_t request_id, uint64_t prompt_tokens, uint32_t vocab_size);

} // namespace kvtier
