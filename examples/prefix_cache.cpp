// The KV data model on its own: a block pool, chained block hashes and a
// prefix index, used the way an inference engine's cache manager would.
// Two requests share a system prompt; a third tenant does not.

#include "runtime/block_table.hpp"
#include "runtime/prefix_chain.hpp"
#include "runtime/prefix_index.hpp"

#include <fmt/format.h>

#include <numeric>
#include <vector>

using namespace kvtier;

int main() {
  constexpr uint32_t block_tokens = 16;
  block_pool pool(64);
  prefix_index index(64);

  std::vector<uint32_t> system_prompt(48);
  std::iota(system_prompt.begin(), system_prompt.end(), 1000);
  auto request = [&](uint32_t first_user_token) {
    auto tokens = system_prompt;
    for (uint32_t i = 0; i < 20; ++i)
      tokens.push_back(first_user_token + i);
    return tokens;
  };

  auto serve = [&](const char* who, const std::vector<uint32_t>& tokens, tenant_salt salt) {
    auto chain = chain_from_tokens(tokens, block_tokens, salt);
    size_t cached = index.longest_prefix(chain);
    // Take references on the cached prefix, then allocate the rest.
    std::vector<block_id> hit;
    for (size_t i = 0; i < cached; ++i) {
      hit.push_back(index.find(chain[i]));
      pool.ref(hit.back());
    }
    block_table table(block_tokens);
    table.adopt_prefix(hit, cached * block_tokens);
    auto appended = table.append(tokens.size() - cached * block_tokens, pool);
    if (!appended) {
      fmt::print("{}: no room\n", who);
      return table;
    }
    for (const auto& h : appended->evicted)
      index.erase(h);
    // Full blocks become shareable.
    for (size_t i = cached; i < chain.size(); ++i) {
      pool.set_hash(table.blocks()[i], chain[i]);
      index.insert(chain[i], table.blocks()[i]);
    }
    fmt::print("{:<8} {} tokens, {} blocks, {} cached, {} computed\n", who, tokens.size(), table.blocks().size(),
               cached, table.blocks().size() - cached);
    return table;
  };

  auto a = serve("alice", request(1), tenant_salt{1});
  auto b = serve("alice", request(2), tenant_salt{1}); // shares the 3 system-prompt blocks
  auto c = serve("bob", request(1), tenant_salt{2});   // another tenant: shares nothing
  a.release_all(pool);
  b.release_all(pool);
  c.release_all(pool);
  fmt::print("free blocks after release: {} of {} (cached blocks stay hashed until reused)\n", pool.free_count(),
             pool.capacity());
  return 0;
}
