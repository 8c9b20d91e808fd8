#pragma once
// Where a block's bytes sit inside one tier's memory.
//
// HBM is layer-major (what paged-attention kernels read): all slots' slices of
// layer 0, then layer 1, ... so slot s of layer l starts at
//   l * slots * layer_bytes + s * layer_bytes.
// DRAM and NVMe are block-major (one block = one contiguous I/O unit):
//   s * block_bytes + l * layer_bytes.
// A move between the two layouts gathers or scatters `layers` pieces of
// layer_bytes each; between two block-major tiers it is one piece.

#include <cstdint>

namespace kvtier {

enum class slot_order : uint8_t { layer_major, block_major };

struct tier_layout {
  slot_order order = slot_order::block_major;
  uint32_t slots = 0;
  uint32_t layers = 1;
  uint64_t layer_bytes = 0; // one block's slice of one layer

  constexpr uint64_t block_bytes() const { return layer_bytes * layers; }
  constexpr uint64_t total_bytes() const { return block_bytes() * slots; }
  constexpr uint64_t offset(uint32_t slot, uint32_t layer) const {
    return order == slot_order::layer_major ? uint64_t{layer} * slots * layer_bytes + uint64_t{slot} * layer_bytes
                                            : uint64_t{slot} * block_bytes() + uint64_t{layer} * layer_bytes;
  }
};

} // namespace kvtier
