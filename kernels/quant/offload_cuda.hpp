#pragma once
// The CUDA twin of offload_codec.hpp, batched for the copy engine: one launch
// encodes (or decodes) every selected layer slice of a chunk of blocks
// between the layer-major HBM pool and a block-major packed staging buffer.
// Plain C++ (no CUDA headers); defined only when the build has nvcc.
//
// Staging layout: pair i's layer first_layer + l sits at
//   (i * layer_count + l) * codec.packed_bytes()
// so a run of pairs whose DRAM slots ascend is one contiguous DMA.
// Bytes equal encode_slice / decode_slice (offload_codec.hpp), padding included.

#include "kernels/quant/offload_codec.hpp"

#include <cstdint>

namespace kvtier::quant::gpu {

struct offload_batch {
  offload_codec codec;
  const uint32_t* pairs = nullptr; // device memory: pair_count (from_slot, to_slot) pairs
  bool hbm_is_from = true;         // the HBM slot is from_slot (encode) or to_slot (decode)
  uint32_t pair_count = 0;
  uint32_t first_layer = 0;
  uint32_t layer_count = 0;
  void* hbm = nullptr; // the layer-major pool: slot s of layer l at (l * hbm_slots + s) * raw_bytes
  uint32_t hbm_slots = 0;
  void* stage = nullptr; // device memory, 16-byte aligned
};

/// HBM slices -> packed staging, on `stream` (a cudaStream_t). 0 or a CUDA error code.
int encode_offload(const offload_batch& batch, void* stream);
/// Packed staging -> HBM slices.
int decode_offload(const offload_batch& batch, void* stream);

} // namespace kvtier::quant::gpu
