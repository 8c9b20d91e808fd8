#include "sim/oracle_bound.hpp"

#include "runtime/prefix_chain.hpp"

#include <limits>
#include <set>
#include <unordered_map>
#include <vector>

namespace kvtier::sim {

oracle_result oracle_prefix_hits(const trace& t, uint32_t block_tokens, uint64_t capacity_blocks) {
  constexpr uint32_t never = std::numeric_limits<uint32_t>::max();
  oracle_result result;
  // Every request's chain, and for every block the requests that use it, in order.
  std::vector<std::vector<block_hash>> chains;
  chains.reserve(t.requests.size());
  struct uses {
    std::vector<uint32_t> at;
    size_t next = 0; // index into `at` of the first use after the current request
  };
  std::unordered_map<block_hash, uses> by_block;
  for (uint32_t r = 0; r < t.requests.size(); ++r) {
    const auto& req = t.requests[r];
    chains.push_back(
        chain_from_external(req.block_ids, req.block_tokens, req.input_tokens, block_tokens, tenant_salt{req.tenant}));
    for (const auto& h : chains.back())
      by_block[h].at.push_back(r);
  }
  // Cached blocks ordered by next use, furthest first.
  std::set<std::pair<uint32_t, block_hash>, std::greater<>> cached;
  std::unordered_map<block_hash, uint32_t> next_use_of; // cached block -> its key in `cached`
  for (uint32_t r = 0; r < chains.size(); ++r) {
    const auto& chain = chains[r];
    result.blocks += chain.size();
    size_t hits = 0;
    while (hits < chain.size() && next_use_of.count(chain[hits]))
      ++hits;
    result.hit_blocks += hits;
    for (const auto& h : chain) {
      auto& u = by_block[h];
      while (u.next < u.at.size() && u.at[u.next] <= r)
        ++u.next;
      uint32_t next = u.next < u.at.size() ? u.at[u.next] : never;
      if (auto it = next_use_of.find(h); it != next_use_of.end()) {
        cached.erase({it->second, h});
        it->second = next;
      } else {
        next_use_of.emplace(h, next);
      }
      cached.insert({next, h});
    }
    while (next_use_of.size() > capacity_blocks) {
      auto furthest = cached.begin();
      next_use_of.erase(furthest->second);
      cached.erase(furthest);
      ++result.evictions;
    }
  }
  return result;
}

} // namespace kvtier::sim
