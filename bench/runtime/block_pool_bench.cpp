// bench/block_pool: block metadata speed against a naive baseline in the same run.
//
//  - alloc+free pairs per second on one core: kvtier's block_pool vs a
//    std::list LRU with a std::unordered_map from id to list position;
//  - prefix lookup ns per token (hashing included): prefix_index vs
//    std::unordered_map<block_hash, id>;
//  - metadata heap bytes per block, measured with mallinfo2.
// Prints a table and one JSON object (also written to --json FILE).

#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/prefix_index.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <list>
#include <random>
#include <unordered_map>
#include <vector>

using namespace kvtier;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr uint32_t pool_blocks = 1u << 20; // 1 Mi slots, 2 TiB of 2 MiB blocks
constexpr uint32_t batch = 64;             // blocks a request takes and frees at once
constexpr uint32_t block_tokens = 16;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

size_t heap_in_use() {
  auto m = mallinfo2();
  return m.uordblks + m.hblkhd; // small allocations + mmapped ones
}

// The naive baseline: what a first implementation typically looks like.
class naive_pool {
public:
  explicit naive_pool(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i)
      where_[i] = lru_.insert(lru_.end(), i);
  }
  bool allocate(uint32_t& out) {
    if (lru_.empty())
      return false;
    out = lru_.front();
    lru_.pop_front();
    where_.erase(out);
    ++refs_[out];
    return true;
  }
  void release(uint32_t id) {
    if (--refs_[id] == 0)
      where_[id] = lru_.insert(lru_.end(), id);
  }

private:
  std::list<uint32_t> lru_;
  std::unordered_map<uint32_t, std::list<uint32_t>::iterator> where_;
  std::unordered_map<uint32_t, uint32_t> refs_;
};

template <class Alloc, class Release>
double alloc_free_rate(uint64_t pairs, Alloc alloc, Release release) {
  std::vector<uint32_t> held(batch);
  auto t0 = clock_type::now();
  for (uint64_t done = 0; done < pairs; done += batch) {
    for (uint32_t i = 0; i < batch; ++i)
      held[i] = alloc();
    for (uint32_t i = batch; i-- > 0;)
      release(held[i]);
  }
  return static_cast<double>(pairs) / seconds_since(t0);
}

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0)
      json_path = argv[i + 1];

  // -- metadata bytes per block ------------------------------------------------
  size_t h0 = heap_in_use();
  auto pool = std::make_unique<block_pool>(pool_blocks);
  double kv_meta = static_cast<double>(heap_in_use() - h0) / pool_blocks;
  size_t h_index = heap_in_use();
  auto pool_index = std::make_unique<prefix_index>(pool_blocks);
  double index_meta = static_cast<double>(heap_in_use() - h_index) / pool_blocks;
  size_t h1 = heap_in_use();
  auto naive = std::make_unique<naive_pool>(pool_blocks);
  uint32_t tmp;
  for (uint32_t i = 0; i < pool_blocks; ++i) { // every block referenced once: refs map populated
    naive->allocate(tmp);
    naive->release(tmp);
  }
  double naive_meta = static_cast<double>(heap_in_use() - h1) / pool_blocks;

  // -- alloc + free ----------------------------------------------------------
  const uint64_t pairs = 50'000'000;
  double kv_rate = alloc_free_rate(
      pairs, [&] { return index_of(pool->allocate()->id); }, [&](uint32_t id) { pool->release(block_id{id}); });
  const uint64_t naive_pairs = 5'000'000;
  double naive_rate = alloc_free_rate(
      naive_pairs,
      [&] {
        uint32_t id = 0;
        naive->allocate(id);
        return id;
      },
      [&](uint32_t id) { naive->release(id); });

  // -- prefix lookup -----------------------------------------------------------
  // 64k cached blocks; look up chains of 128 blocks (2,048 tokens), 3/4 hits.
  constexpr uint32_t cached = 1u << 16, chain_blocks = 128, chains = 2'000;
  std::mt19937 rng(7);
  std::vector<std::vector<uint32_t>> token_blocks(cached, std::vector<uint32_t>(block_tokens));
  for (auto& b : token_blocks)
    for (auto& t : b)
      t = rng();
  prefix_index index(cached * 2);
  std::unordered_map<block_hash, uint32_t> naive_index;
  for (uint32_t c = 0; c < cached / chain_blocks; ++c) {
    block_hash parent{};
    for (uint32_t b = 0; b < chain_blocks; ++b) {
      parent = hash_block(parent, token_blocks[c * chain_blocks + b], {});
      index.insert(parent, block_id{c * chain_blocks + b});
      naive_index.emplace(parent, c * chain_blocks + b);
    }
  }
  auto lookup = [&](auto&& contains) {
    uint64_t hits = 0;
    auto t0 = clock_type::now();
    for (uint32_t q = 0; q < chains; ++q) {
      uint32_t c = q % (cached / chain_blocks);
      uint32_t stop = chain_blocks * 3 / 4; // miss after 3/4 of the chain
      block_hash parent{};
      for (uint32_t b = 0; b < chain_blocks; ++b) {
        auto& tokens = token_blocks[c * chain_blocks + b];
        if (b == stop)
          tokens[0] ^= 1;
        parent = hash_block(parent, tokens, {});
        if (b == stop)
          tokens[0] ^= 1;
        if (!contains(parent))
          break;
        ++hits;
      }
    }
    double tokens = static_cast<double>(chains) * (chain_blocks * 3 / 4 + 1) * block_tokens;
    return std::pair{seconds_since(t0) * 1e9 / tokens, hits};
  };
  auto [kv_ns, kv_hits] = lookup([&](const block_hash& h) { return index.find(h) != invalid_block; });
  auto [naive_ns, naive_hits] = lookup([&](const block_hash& h) { return naive_index.count(h) > 0; });
  if (kv_hits != naive_hits) {
    fmt::print(stderr, "bench_block_pool: lookup results differ ({} vs {})\n", kv_hits, naive_hits);
    return 1;
  }

  fmt::print("{:<34} {:>14} {:>14} {:>8} {:>10}\n", "metric", "kvtier", "naive", "ratio", "goal");
  fmt::print("{:<34} {:>14.1f} {:>14.1f} {:>7.1f}x {:>10}\n", "alloc+free per second (M, 1 core)", kv_rate / 1e6,
             naive_rate / 1e6, kv_rate / naive_rate, ">= 20");
  fmt::print("{:<34} {:>14.2f} {:>14.2f} {:>7.1f}x {:>10}\n", "prefix lookup ns per token", kv_ns, naive_ns,
             naive_ns / kv_ns, "<= 20");
  fmt::print("{:<34} {:>14.1f} {:>14.1f} {:>7.1f}x {:>10}\n", "metadata bytes per block (pool)", kv_meta, naive_meta,
             naive_meta / kv_meta, "<= 32");
  fmt::print("{:<34} {:>14.1f} {:>14} {:>8} {:>10}\n", "  + prefix index bytes per block", index_meta, "-", "", "");
  nlohmann::json j{
      {"benchmark", "block_pool"},
      {"alloc_free_per_second", {{"kvtier", kv_rate}, {"naive", naive_rate}, {"ratio", kv_rate / naive_rate}}},
      {"prefix_lookup_ns_per_token", {{"kvtier", kv_ns}, {"naive", naive_ns}, {"ratio", naive_ns / kv_ns}}},
      {"metadata_bytes_per_block", {{"kvtier", kv_meta}, {"naive", naive_meta}, {"ratio", naive_meta / kv_meta}}},
      {"prefix_index_bytes_per_block", index_meta},
      {"goals",
       {{"alloc_free_per_second", 20e6}, {"prefix_lookup_ns_per_token", 20}, {"metadata_bytes_per_block", 32}}},
  };
  fmt::print("{}\n", j.dump());
  if (!json_path.empty())
    std::ofstream(json_path) << j.dump(2) << "\n";
  return 0;
}
