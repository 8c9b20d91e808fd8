#pragma once
// The stand-in compute of a cluster node. The daemon runs no model, so a
// node's "prefill" produces each block's KV bytes as a function of the
// block's chained hash (the same bytes on every node, as a real model's KV
// for the same prefix would be), at the configured modeled rate; "decode"
// steps produce tokens from the KV bytes' checksum and the step.
//
// Invariants: the bytes of a block depend on its hash alone, so a block
// recomputed on another node is byte-identical; chain() hashes full blocks
// and a partial tail alike (the tail's hash covers its tokens only).

#include "runtime/block_hash.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::node {

/// The chained hashes of `prompt`'s blocks of `block_tokens` tokens, the last one partial if
/// the prompt does not fill it.
std::vector<block_hash> chain(std::span<const uint32_t> prompt, uint32_t block_tokens, uint64_t salt);

/// Tokens of block `index` of a prompt of `prompt_tokens`.
uint32_t tokens_of_block(uint64_t prompt_tokens, uint32_t block_tokens, size_t index);

/// Writes the block's KV bytes.
void fill_block(std::span<std::byte> out, const block_hash& hash);

/// The token a decode step produces after `previous`.
uint64_t next_token(uint64_t previous, uint64_t step);

} // namespace kvtier::node
