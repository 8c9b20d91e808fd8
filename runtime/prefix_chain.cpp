#include "runtime/prefix_chain.hpp"

#include <algorithm>

namespace kvtier {

std::vector<block_hash> chain_from_external(std::span<const uint64_t> ids, uint32_t ext_tokens, uint64_t prompt_tokens,
                                            uint32_t B, tenant_salt salt) {
  std::vector<block_hash> chain;
  if (ids.empty() || ext_tokens == 0 || B == 0)
    return chain;
  uint64_t covered = std::min<uint64_t>(prompt_tokens, uint64_t{ext_tokens} * ids.size());
  uint64_t blocks = (covered + B - 1) / B;
  chain.reserve(blocks);
  block_hash parent{};
  for (uint64_t j = 0; j < blocks; ++j) {
    uint64_t begin = j * B, end = std::min<uint64_t>(begin + B, covered);
    block_hash h = parent;
    for (uint64_t k = begin / ext_tokens; k * ext_tokens < end; ++k) {
      // Offset of this kvtier block inside the external block (0 when it spans several).
      uint64_t offset = begin > k * ext_tokens ? begin - k * ext_tokens : 0;
      h = hash_external_block(h, ids[k] * 0x9E3779B97F4A7C15ull ^ (offset + 1), salt);
    }
    chain.push_back(h);
    parent = h;
  }
  return chain;
}

std::vector<block_hash> chain_from_tokens(std::span<const uint32_t> tokens, uint32_t B, tenant_salt salt) {
  std::vector<block_hash> chain;
  block_hash parent{};
  for (size_t begin = 0; begin + B <= tokens.size(); begin += B) {
    parent = hash_block(parent, tokens.subspan(begin, B), salt);
    chain.push_back(parent);
  }
  return chain;
}

} // namespace kvtier
