#include "cache/belady.hpp"

#include <functional>
#include <limits>
#include <set>
#include <utility>

namespace kvtier::cache {

belady_result belady_prefix_hits(std::span<const std::vector<block_key>> chains, uint64_t key_count,
                                 uint64_t capacity) {
  constexpr uint64_t never = std::numeric_limits<uint64_t>::max();
  // For every block, its uses in order as (request << 32 | position in that
  // request's chain); a cursor past the current request. Among blocks next
  // used by the same request the deepest goes first: a prefix hit stops at
  // its first miss, so a hole early in a chain costs every block after it.
  std::vector<std::vector<uint64_t>> uses(key_count);
  for (uint32_t r = 0; r < chains.size(); ++r)
    for (uint32_t i = 0; i < chains[r].size(); ++i) {
      block_key k = chains[r][i];
      if (uses[k].empty() || (uses[k].back() >> 32) != r)
        uses[k].push_back(uint64_t{r} << 32 | i);
    }
  std::vector<uint32_t> cursor(key_count, 0);
  std::vector<uint64_t> cached_next(key_count, 0);
  std::vector<uint8_t> cached(key_count, 0);
  std::set<std::pair<uint64_t, block_key>, std::greater<>> by_next; // furthest first
  uint64_t resident = 0;
  belady_result result;
  for (uint32_t r = 0; r < chains.size(); ++r) {
    const auto& chain = chains[r];
    result.blocks += chain.size();
    size_t hits = 0;
    while (hits < chain.size() && cached[chain[hits]])
      ++hits;
    result.hit_blocks += hits;
    for (block_key k : chain) {
      auto& u = uses[k];
      auto& c = cursor[k];
      while (c < u.size() && (u[c] >> 32) <= r)
        ++c;
      uint64_t next = c < u.size() ? u[c] : never;
      if (cached[k]) {
        by_next.erase({cached_next[k], k});
      } else {
        cached[k] = 1;
        ++resident;
      }
      cached_next[k] = next;
      by_next.insert({next, k});
    }
    while (resident > capacity) {
      auto furthest = by_next.begin();
      cached[furthest->second] = 0;
      by_next.erase(furthest);
      --resident;
    }
  }
  return result;
}

} // namespace kvtier::cache
