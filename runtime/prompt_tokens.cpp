#include "runtime/prompt_tokens.hpp"

#include "runtime/check.hpp"

#include <xxhash.h>

namespace kvtier {
namespace {

uint32_t token_at(uint64_t block_id, uint64_t offset, uint32_t vocab_size) {
  const uint64_t key[2] = {block_id, offset};
  return static_cast<uint32_t>(XXH3_64bits(key, sizeof key) % vocab_size);
}

} // namespace

std::vector<uint32_t> tokens_from_external(std::span<const uint64_t> external_ids, uint32_t external_block_tokens,
                                           uint64_t prompt_tokens, uint32_t vocab_size) {
  KVTIER_CHECK(vocab_size > 0 && external_block_tokens > 0, "tokens_from_external: empty vocabulary or block");
  std::vector<uint32_t> tokens(prompt_tokens);
  for (uint64_t p = 0; p < prompt_tokens; ++p) {
    uint64_t block = p / external_block_tokens;
    // Past the trace's last id (a prompt longer than its ids say) the
    // position itself keeps tokens distinct from every shared block.
    uint64_t id = block < external_ids.size() ? external_ids[block] : ~block;
    tokens[p] = token_at(id, p % external_block_tokens, vocab_size);
  }
  return tokens;
}

std::vector<uint32_t> tokens_from_request_id(uint64_t request_id, uint64_t prompt_tokens, uint32_t vocab_size) {
  KVTIER_CHECK(vocab_size > 0, "tokens_from_request_id: empty vocabulary");
  std::vector<uint32_t> tokens(prompt_tokens);
  // Salted so request 5 does not share tokens with a trace block id 5.
  for (uint64_t p = 0; p < prompt_tokens; ++p)
    tokens[p] = token_at(request_id ^ 0x9e3779b97f4a7c15ULL, p, vocab_size);
  return tokens;
}

} // namespace kvtier
