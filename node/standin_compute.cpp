#include "node/standin_compute.hpp"

#include <algorithm>
#include <cstring>

namespace kvtier::node {

namespace {

// A 64-bit mixing step (the finalizer of SplitMix64): every output bit
// depends on every input bit, which is all the stand-in KV needs.
constexpr uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace

std::vector<block_hash> chain(std::span<const uint32_t> prompt, uint32_t block_tokens, uint64_t salt) {
  std::vector<block_hash> out;
  block_hash parent{};
  for (size_t at = 0; at < prompt.size(); at += block_tokens) {
    auto n = std::min<size_t>(block_tokens, prompt.size() - at);
    parent = hash_block(parent, prompt.subspan(at, n), tenant_salt{salt});
    out.push_back(parent);
  }
  return out;
}

uint32_t tokens_of_block(uint64_t prompt_tokens, uint32_t block_tokens, size_t index) {
  uint64_t start = uint64_t{block_tokens} * index;
  return start >= prompt_tokens ? 0 : static_cast<uint32_t>(std::min<uint64_t>(block_tokens, prompt_tokens - start));
}

void fill_block(std::span<std::byte> out, const block_hash& hash) {
  uint64_t state = hash.lo ^ mix(hash.hi);
  size_t at = 0;
  for (; at + 8 <= out.size(); at += 8) {
    state += 0x9e3779b97f4a7c15ull;
    uint64_t word = mix(state);
    std::memcpy(out.data() + at, &word, 8);
  }
  uint64_t word = mix(state + 1);
  std::memcpy(out.data() + at, &word, out.size() - at);
}

uint64_t next_token(uint64_t previous, uint64_t step) {
  return mix(previous ^ mix(step + 1)) % 128'256; // Llama 3's vocabulary
}

} // namespace kvtier::node
