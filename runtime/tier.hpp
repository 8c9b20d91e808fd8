#pragma once
// The levels of kvtier's memory hierarchy, fastest first.

#include <array>
#include <cstdint>
#include <string_view>

namespace kvtier {

enum class tier : uint8_t { hbm = 0, dram = 1, nvme = 2 };
inline constexpr size_t tier_count = 3;
inline constexpr std::array<tier, tier_count> all_tiers{tier::hbm, tier::dram, tier::nvme};

constexpr std::string_view name_of(tier t) {
  switch (t) {
    case tier::hbm:
      return "hbm";
    case tier::dram:
      return "dram";
    case tier::nvme:
      return "nvme";
  }
  return "?";
}

constexpr size_t index_of(tier t) {
  return static_cast<size_t>(t);
}

} // namespace kvtier
