// A C++ client process for the Python tests: blocks cross between the two
// languages through kvtierd, so the 16-byte key layout (little-endian lo,
// then hi) and the block bytes must agree on both sides.
//   cross_client <socket> <tenant> <token> store   stores blocks {lo 1000+i, hi 42}, byte j = (31 i + j) mod 256
//   cross_client <socket> <tenant> <token> check   reads blocks {lo 2000+i, hi 7}, expects byte j = (17 i + 3 j) mod 256
// Exit 0 when every one of the 4 blocks was stored, or found intact.

#include "client/client.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t blocks = 4;

unsigned char stored_byte(std::size_t i, std::size_t j) {
  return static_cast<unsigned char>((31 * i + j) % 256);
}
unsigned char checked_byte(std::size_t i, std::size_t j) {
  return static_cast<unsigned char>((17 * i + 3 * j) % 256);
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: cross_client <socket> <tenant> <token> store|check\n");
    return 2;
  }
  const std::string mode = argv[4];
  auto c = kvtier::client::client::connect(argv[1], argv[2], argv[3]);
  if (!c) {
    std::fprintf(stderr, "cross_client: %s\n", c.err().what().c_str());
    return 1;
  }
  const std::size_t block = c->block_bytes();
  auto region = c->map_region(blocks * block);
  if (!region) {
    std::fprintf(stderr, "cross_client: %s\n", region.err().what().c_str());
    return 1;
  }
  auto* base = reinterpret_cast<unsigned char*>((*region)->data());
  std::vector<kvtier::client::block_key> keys;
  std::vector<std::uint64_t> offsets;
  for (std::size_t i = 0; i < blocks; ++i) {
    keys.push_back(mode == "store" ? kvtier::client::block_key{1000 + i, 42} : kvtier::client::block_key{2000 + i, 7});
    offsets.push_back(i * block);
    if (mode == "store")
      for (std::size_t j = 0; j < block; ++j)
        base[i * block + j] = stored_byte(i, j);
  }
  auto done = mode == "store" ? c->batch_set(keys, offsets) : c->batch_get(keys, offsets);
  if (!done) {
    std::fprintf(stderr, "cross_client: %s\n", done.err().what().c_str());
    return 1;
  }
  std::size_t good = 0;
  for (std::size_t i = 0; i < blocks; ++i) {
    bool intact = (*done)[i];
    for (std::size_t j = 0; intact && mode == "check" && j < block; ++j)
      intact = base[i * block + j] == checked_byte(i, j);
    good += intact ? 1 : 0;
  }
  std::printf("cross_client %s: %zu of %zu blocks\n", mode.c_str(), good, blocks);
  return good == blocks ? 0 : 1;
}
