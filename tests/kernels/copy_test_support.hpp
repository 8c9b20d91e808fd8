#pragma once
// Known patterns for the copy tests: every word of every block depends on
// (seed, slot, word), so a block that lands in the wrong slot, a stale one, or
// a torn one differs from what is expected.

#include "kernels/copy/mover.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <vector>

namespace kvtier::copy::test {

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::vector<std::byte> pattern(uint64_t seed, uint32_t slot, uint64_t bytes) {
  std::vector<std::byte> out(bytes);
  for (uint64_t w = 0; w * 8 < bytes; ++w) {
    uint64_t v = mix(seed * 0x100000001ull ^ (uint64_t{slot} << 40) ^ w);
    std::memcpy(out.data() + w * 8, &v, std::min<uint64_t>(8, bytes - w * 8));
  }
  return out;
}

/// Submits and waits; returns the result.
inline move_result move_now(tier_mover& m, move_request r) {
  std::promise<move_result> landed;
  m.submit(std::move(r), [&](const move_result& res) { landed.set_value(res); });
  return landed.get_future().get();
}

} // namespace kvtier::copy::test
