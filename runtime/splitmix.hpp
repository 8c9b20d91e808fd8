#pragma once
// splitmix64: a 64-bit mix whose outputs over consecutive inputs pass as
// independent uniform draws. Seeded choices (random eviction, synthetic
// scores) use it so that the same seed gives the same choices on every
// machine, independent of any other random stream.

#include <cstdint>

namespace kvtier {

constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

} // namespace kvtier
