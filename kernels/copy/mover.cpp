#include "kernels/copy/mover.hpp"

#include "runtime/check.hpp"

#include <cstring>

namespace kvtier::copy {

const char* to_string(copy_path p) {
  switch (p) {
    case copy_path::automatic:
      return "automatic";
    case copy_path::dma_runs:
      return "dma_runs";
    case copy_path::dma_batch:
      return "dma_batch";
    case copy_path::dma_2d:
      return "dma_2d";
    case copy_path::host_staged:
      return "host_staged";
    case copy_path::sm_copy:
      return "sm_copy";
    case copy_path::host_memcpy:
      return "host_memcpy";
    case copy_path::split:
      return "split";
  }
  return "?";
}

const path_cost& direction_costs::of(copy_path p) const {
  switch (p) {
    case copy_path::dma_runs:
      return dma_runs;
    case copy_path::dma_batch:
      return dma_batch;
    case copy_path::dma_2d:
      return dma_2d;
    case copy_path::sm_copy:
      return sm_copy;
    case copy_path::split:
      return split;
    default:
      return host_staged;
  }
}

path_cost& direction_costs::of(copy_path p) {
  return const_cast<path_cost&>(static_cast<const direction_costs&>(*this).of(p));
}

uint64_t block_checksum(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, bytes.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < bytes.size(); ++i)
    h = (h ^ static_cast<uint64_t>(bytes[i])) * 0x100000001b3ull;
  h ^= bytes.size();
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

} // namespace kvtier::copy
