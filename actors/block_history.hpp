#pragma once
// What the block manager's cache policies know of every block seen in a run:
// a dense key per block hash (cache/'s policies work over dense keys), how
// often the block was used, and the context of its latest use by a request.
// One history serves the whole tier stack, so a block's past is the same
// whichever tier judges it.
//
// Invariants: keys are 0, 1, 2, ... in first-seen order and never reused;
// hash_of(key_of(h)) == h; a key's context is its latest request access
// (default until a request used it).
// Not thread-safe: owned by the block manager.

#include "cache/policy.hpp"
#include "runtime/block_hash.hpp"

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace kvtier {

class block_history {
public:
  cache::block_key key_of(const block_hash& hash) {
    auto [it, fresh] = keys_.try_emplace(hash, static_cast<cache::block_key>(hashes_.size()));
    if (fresh) {
      hashes_.push_back(hash);
      context_.emplace_back();
      uses_.push_back(0);
    }
    return it->second;
  }
  const block_hash& hash_of(cache::block_key key) const { return hashes_[key]; }
  const cache::block_context& context(cache::block_key key) const { return context_[key]; }

  /// A request uses its chain, `hit_blocks` of it found cached: each block's
  /// context becomes this use's, as cache/'s tier replay classes it (the
  /// request's last block is its tail; it extends a prefix when more than
  /// its first block was found).
  void note_request(std::span<const block_hash> chain, size_t hit_blocks) {
    for (size_t i = 0; i < chain.size(); ++i) {
      auto key = key_of(chain[i]);
      context_[key] = {uses_[key]++, static_cast<uint32_t>(i), i + 1 == chain.size(), hit_blocks > 1};
    }
  }

private:
  std::unordered_map<block_hash, cache::block_key> keys_;
  std::vector<block_hash> hashes_;
  std::vector<cache::block_context> context_;
  std::vector<uint32_t> uses_; // request uses so far
};

} // namespace kvtier
