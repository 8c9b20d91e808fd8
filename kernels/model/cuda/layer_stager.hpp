#pragma once
// Layer streaming for tiered PagedAttention: the blocks of a step whose
// block-table entries carry paged_kv_pool::dram_bit stay in the DRAM pool
// (pinned host memory, block-major) and reach HBM one layer at a time, into a
// staging area of two buffers, while the model computes.
//
// Per step: plan() gives every distinct streamed DRAM slot a staging index
// (ascending slot order, so runs of adjacent DRAM slots are runs in staging
// too) and rewrites the entries to `staged_from + index`, which the attention
// kernels resolve in the staging buffer (paged_decode_args::staged). Then, on
// the host, in layer order: before_attention(l) enqueues the copy of layer
// l + 1 on the copy stream (after layer l - 1's attention freed its buffer)
// and makes the compute stream wait for layer l's copy; after_attention(l)
// marks buffer l % 2 free. So the copy of layer l + 1 overlaps layer l's
// projections and attention, and PCIe stays busy while compute runs.
//
// Copies are strided DMAs (one cudaMemcpy2DAsync per run of adjacent DRAM
// slots: a layer's slice of each block, block_bytes apart, lands slot_stride
// apart): no kernels, so no SMs are taken from compute.
//
// Not thread-safe; one step at a time (the compute stream orders steps).

#include "runtime/tier_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvtier::model::cuda {

class layer_stager {
public:
  layer_stager() = default;
  layer_stager(const layer_stager&) = delete;
  layer_stager& operator=(const layer_stager&) = delete;
  ~layer_stager();

  /// `compute` is the cudaStream_t the model runs on. False (and `error`)
  /// when streams or events cannot be made.
  bool start(void* compute, std::string& error);

  /// Rewrites streamed entries of `tables` (all of a step's block tables) to
  /// staging indices from `staged_from` on; grows the staging buffers to fit.
  /// Returns how many slices a layer stages (0: nothing streams). False in
  /// `ok` when device memory runs out.
  uint32_t plan(std::span<uint32_t> tables, uint32_t staged_from, uint64_t layer_bytes, bool& ok, std::string& error);

  /// The step's first copy (layer 0); call after plan() when it staged any.
  void prime(const std::byte* dram_base, const tier_layout& dram_layout);
  /// Enqueues layer + 1's copy (if any) and orders the compute stream after
  /// layer `layer`'s copy. Returns layer's staging buffer.
  const void* before_attention(uint32_t layer, uint32_t layers);
  /// Layer `layer`'s attention is enqueued: its buffer may be refilled after it.
  void after_attention(uint32_t layer);

  /// Bytes the last planned step copies per layer.
  uint64_t bytes_per_layer() const { return uint64_t{slices_} * layer_bytes_; }

private:
  void copy_layer(uint32_t layer);

  void* compute_ = nullptr;
  void* copy_stream_ = nullptr;
  void* copied_[2] = {nullptr, nullptr};
  void* consumed_[2] = {nullptr, nullptr};
  std::byte* buffers_[2] = {nullptr, nullptr};
  uint64_t capacity_bytes_ = 0;
  // The planned step.
  std::vector<uint32_t> slots_; // DRAM slot of each staging index, ascending
  uint32_t slices_ = 0;
  uint64_t layer_bytes_ = 0;
  const std::byte* dram_base_ = nullptr;
  tier_layout dram_layout_;
};

} // namespace kvtier::model::cuda
