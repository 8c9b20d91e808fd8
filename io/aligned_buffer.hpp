#pragma once
// Zeroed memory on a sector boundary, as O_DIRECT I/O needs it.

#include "io/slot_format.hpp"

#include <cstdlib>
#include <cstring>
#include <memory>

namespace kvtier::io {

using aligned_buffer = std::unique_ptr<std::byte, void (*)(void*)>;

/// `n` zero bytes at a sector_bytes-aligned address; null when out of memory.
inline aligned_buffer aligned_bytes(uint64_t n) {
  void* mem = nullptr;
  if (posix_memalign(&mem, sector_bytes, n) != 0)
    return {nullptr, &std::free};
  std::memset(mem, 0, n);
  return {static_cast<std::byte*>(mem), &std::free};
}

} // namespace kvtier::io
