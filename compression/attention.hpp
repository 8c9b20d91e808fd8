#pragma once
// What a compression policy sees of one (layer, kv head): the softmax
// attention probabilities of some queries over the cached keys.
//
// Invariants:
//  (1) probs holds group * query_pos.size() rows of `keys` floats, ordered
//      [query head][query]; row (h, q) is the distribution of query head h at
//      position query_pos[q] over keys 0..keys-1.
//  (2) A query at position p attends keys 0..min(p, keys-1) (causal); the
//      other entries of its row are 0, and each row sums to 1.
//  (3) query_pos is ascending. Prompt queries have p < keys; queries after
//      the prompt (decode steps) have p >= keys and see every key.

#include <cstdint>
#include <span>
#include <vector>

namespace kvtier::compression {

struct observed_attention {
  uint32_t keys = 0;
  uint32_t group = 1;              // query heads sharing this kv head (GQA)
  std::vector<uint32_t> query_pos; // one entry per query, ascending
  std::vector<float> probs;        // group * query_pos.size() * keys

  uint32_t queries() const { return static_cast<uint32_t>(query_pos.size()); }
  std::span<const float> row(uint32_t head, uint32_t query) const {
    return {probs.data() + (uint64_t{head} * queries() + query) * keys, keys};
  }
  /// Keys a query at `pos` can see (the number of observers is counted from this).
  uint32_t visible(uint32_t pos) const { return pos < keys ? pos + 1 : keys; }
};

} // namespace kvtier::compression
