#include "runtime/block_hash.hpp"

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstring>

namespace kvtier {
namespace {

block_hash finish(XXH128_hash_t h) {
  block_hash out{h.low64, h.high64};
  if (out.empty())
    out.lo = 1; // keep zero reserved for "no hash"
  return out;
}

} // namespace

block_hash hash_block(const block_hash& parent, std::span<const uint32_t> tokens, tenant_salt salt) {
  // Small blocks hash in one shot from a stack buffer; large ones stream.
  constexpr size_t stack_tokens = 256;
  if (tokens.size() <= stack_tokens) {
    unsigned char buffer[sizeof(block_hash) + stack_tokens * sizeof(uint32_t)];
    std::memcpy(buffer, &parent, sizeof(block_hash));
    std::memcpy(buffer + sizeof(block_hash), tokens.data(), tokens.size_bytes());
    return finish(XXH3_128bits_withSeed(buffer, sizeof(block_hash) + tokens.size_bytes(), salt.value));
  }
  XXH3_state_t state;
  XXH3_128bits_reset_withSeed(&state, salt.value);
  XXH3_128bits_update(&state, &parent, sizeof(block_hash));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  return finish(XXH3_128bits_digest(&state));
}

block_hash hash_external_block(const block_hash& parent, uint64_t external_id, tenant_salt salt) {
  unsigned char buffer[sizeof(block_hash) + sizeof(uint64_t) + 1];
  std::memcpy(buffer, &parent, sizeof(block_hash));
  std::memcpy(buffer + sizeof(block_hash), &external_id, sizeof(uint64_t));
  buffer[sizeof(buffer) - 1] = 0xE1; // domain tag: never equal to a token block's input
  return finish(XXH3_128bits_withSeed(buffer, sizeof(buffer), salt.value));
}

} // namespace kvtier
