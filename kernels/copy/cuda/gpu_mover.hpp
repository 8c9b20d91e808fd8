#pragma once
// The GPU mover (kernels/copy/cuda_mover.hpp's make_cuda_mover): the HBM pool
// (cudaMalloc, layer-major), the pinned and mapped DRAM pool (block-major,
// 4 KiB aligned), one lane per direction (lane.hpp), and the chooser that
// picks a path per request from calibrated costs (calibration.cpp measures
// them at start-up). Host C++20 over the CUDA runtime; the kernels live in
// copy_kernels.cu.

#include "kernels/copy/cuda/lane.hpp"
#include "kernels/copy/mover.hpp"

#include <memory>
#include <string>
#include <vector>

namespace kvtier::copy::gpu {

class gpu_mover final : public tier_mover {
public:
  gpu_mover(const mover_options& o, std::string device_name);
  ~gpu_mover() override;

  std::string name() const override { return "cuda:" + std::to_string(o_.device) + " " + device_name_; }
  bool on_gpu() const override { return true; }
  void submit(move_request request, move_callback done) override;
  void drain() override {
    lanes_[0]->drain();
    lanes_[1]->drain();
  }
  link_stats stats(tier from, tier) const override { return lanes_[from == tier::dram ? 0 : 1]->stats(); }
  const tier_layout& layout(tier t) const override { return t == tier::hbm ? hbm_layout_ : dram_layout_; }
  const mover_costs& costs() const override { return costs_; }
  copy_path choose(const move_request& r) const override;

  /// Kernel-assisted paths only while the other direction is idle: with
  /// copy kernels in both directions a concurrent GEMM slowed by 16% on the
  /// H200, and DMA alone moved more both ways at 256 KiB and 2 MiB blocks.
  bool kernels_welcome(bool to_hbm) const { return o_.allow_sm_copy && !other_direction_busy(to_hbm); }
  bool other_direction_busy(bool to_hbm) const { return lanes_[to_hbm ? 1 : 0]->busy(); }

  std::byte* dram_base() override { return dram_; }
  void* hbm_base() override { return hbm_; }
  void write_slot(tier t, uint32_t slot, std::span<const std::byte> block) override;
  void read_slot(tier t, uint32_t slot, std::span<std::byte> block) override;

  // -- for the lanes ------------------------------------------------------

  const mover_options& options() const { return o_; }
  uint64_t stage_bytes() const { return stage_bytes_; }
  uint32_t desc_capacity() const { return desc_capacity_; }
  std::byte* hbm() const { return static_cast<std::byte*>(hbm_); }
  std::byte* dram() const { return dram_; }
  std::byte* dram_device() const { return static_cast<std::byte*>(dram_dev_); }
  unsigned sm_ctas() const { return sm_ctas_; }
  unsigned dma_streams() const { return dma_streams_; }
  slice_layout hbm_slices() const {
    return {o_.shape.layer_bytes, uint64_t{o_.shape.hbm_slots} * o_.shape.layer_bytes, 0};
  }
  slice_layout dram_slices() const { return {o_.shape.block_bytes(), o_.shape.layer_bytes, 0}; } // raw paths only

private:
  // calibration.cpp
  double time_request(tier from, tier to, std::vector<slot_pair> moves, copy_path path, uint32_t layer_count = 0);
  void calibrate();

  mover_options o_;
  std::string device_name_;
  tier_layout hbm_layout_;
  tier_layout dram_layout_;
  mover_costs costs_;
  unsigned sm_ctas_;
  unsigned dma_streams_;
  void* hbm_ = nullptr;
  void* dram_raw_ = nullptr;
  std::byte* dram_ = nullptr;
  void* dram_dev_ = nullptr;
  uint64_t stage_bytes_ = 0;
  uint32_t desc_capacity_ = 0;
  uint32_t threads_ = 0;
  std::unique_ptr<lane> lanes_[2]; // [0] DRAM -> HBM, [1] HBM -> DRAM
};

} // namespace kvtier::copy::gpu
