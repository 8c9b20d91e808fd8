// A kvtierd client: map a shared region, store a few blocks, ask which
// prefix the daemon holds, read the blocks back and compare.
//   client <socket or host:port> <tenant> <token>

#include "client/client.hpp"

#include <cstdio>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: client <socket or host:port> <tenant> <token>\n");
    return 2;
  }
  auto c = kvtier::client::client::connect(argv[1], argv[2], argv[3]);
  if (!c) {
    std::fprintf(stderr, "client: %s\n", c.err().what().c_str());
    return 1;
  }
  const std::size_t block = c->block_bytes(), n = 4;
  auto region = c->map_region(2 * n * block);
  if (!region) {
    std::fprintf(stderr, "client: %s\n", region.err().what().c_str());
    return 1;
  }
  std::byte* base = (*region)->data();
  std::vector<kvtier::client::block_key> keys;
  std::vector<std::uint64_t> offsets, back;
  for (std::size_t i = 0; i < n; ++i) {
    std::memset(base + i * block, static_cast<int>('a' + i), block);
    keys.push_back({1000 + i, 42});
    offsets.push_back(i * block);
    back.push_back((n + i) * block);
  }
  auto stored = c->batch_set(keys, offsets);
  auto held = c->batch_exists(keys);
  auto found = c->batch_get(keys, back);
  if (!stored || !held || !found) {
    std::fprintf(stderr, "client: a request failed\n");
    return 1;
  }
  std::size_t same = 0;
  for (std::size_t i = 0; i < n; ++i)
    same += (*found)[i] && std::memcmp(base + offsets[i], base + back[i], block) == 0 ? 1 : 0;
  std::printf("client: %zu blocks of %zu B stored, %zu held, %zu read back intact\n", n, block, *held, same);
  return same == n ? 0 : 1;
}
