// The GPU mover's facade: pools, lanes, the chooser, synchronous slot
// access, and the entry points of kernels/copy/cuda_mover.hpp.

#include "kernels/copy/cuda/gpu_mover.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "runtime/check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

namespace kvtier::copy {
namespace gpu {

gpu_mover::gpu_mover(const mover_options& o, std::string device_name)
    : o_(o),
      device_name_(std::move(device_name)),
      hbm_layout_{slot_order::layer_major, o.shape.hbm_slots, o.shape.layers, o.shape.layer_bytes},
      dram_layout_{slot_order::block_major, o.shape.dram_slots, o.shape.layers, o.shape.dram_layer_bytes()},
      costs_(o.costs ? *o.costs : costs_from_profile(pcie_profile{})),
      sm_ctas_(o.sm_copy_ctas),
      dma_streams_(o.dma_streams == 0 ? 2 : std::min(o.dma_streams, max_dma_streams)) {
  KVTIER_CHECK(o.shape.layers > 0 && o.shape.layer_bytes > 0, "pool shape needs layers and layer_bytes");
  KVTIER_CHECK(o.shape.layer_bytes % 16 == 0, "layer_bytes must be a multiple of 16");
  KVTIER_CHECK(!o.shape.codec || o.shape.codec->raw_bytes() == o.shape.layer_bytes,
               "the offload codec's slice is not the pool's layer_bytes");
  must(cudaSetDevice(o.device), "cudaSetDevice");
  must(cudaMalloc(&hbm_, std::max<uint64_t>(hbm_layout_.total_bytes(), 16)), "cudaMalloc(HBM pool)");
  // Mapped: the sm_copy path reads it from kernels. cudaHostAlloc does not
  // promise page alignment (small pools came back 4 KiB-misaligned on the
  // H200), and the NVMe page store's O_DIRECT I/O needs it: over-allocate
  // by a page and align up.
  must(cudaHostAlloc(&dram_raw_, dram_layout_.total_bytes() + 4096, cudaHostAllocMapped | cudaHostAllocPortable),
       "cudaHostAlloc(DRAM pool)");
  uintptr_t raw = reinterpret_cast<uintptr_t>(dram_raw_);
  uintptr_t shift = (4096 - raw % 4096) % 4096;
  dram_ = static_cast<std::byte*>(dram_raw_) + shift;
  void* raw_dev = nullptr;
  must(cudaHostGetDevicePointer(&raw_dev, dram_raw_, 0), "cudaHostGetDevicePointer");
  dram_dev_ = static_cast<std::byte*>(raw_dev) + shift;
  stage_bytes_ = std::max(o.chunk_bytes, o.shape.block_bytes());
  // Split chunks hold more blocks than staging does (the kernel's share
  // needs none): room for four stagings' worth of descriptors.
  desc_capacity_ = static_cast<uint32_t>(4 * (stage_bytes_ / o.shape.layer_bytes + 1));
  threads_ = o.host_threads == 0 ? default_host_threads() : o.host_threads;
  costs_.dma_streams = dma_streams_;
  costs_.sm_copy_ctas = sm_ctas_;
  lanes_[0] = std::make_unique<lane>(*this, true, threads_ - 1);
  lanes_[1] = std::make_unique<lane>(*this, false, threads_ - 1);
  // Calibration times the raw paths; with a codec only staged DMA runs.
  if (o.calibrate && !o.costs && !o.shape.codec)
    calibrate();
}

gpu_mover::~gpu_mover() {
  // Both lanes idle before either goes: a busy lane's chooser asks the other one.
  drain();
  lanes_[0].reset();
  lanes_[1].reset();
  cudaFree(hbm_);
  cudaFreeHost(dram_raw_);
}

void gpu_mover::submit(move_request request, move_callback done) {
  auto problem = check_request(request, o_.shape);
  KVTIER_CHECK(problem.empty(), problem.c_str());
  auto j = std::make_unique<job>();
  j->request = std::move(request);
  j->done = std::move(done);
  bool to_hbm = j->request.to == tier::hbm;
  lanes_[to_hbm ? 0 : 1]->push(std::move(j));
}

copy_path gpu_mover::choose(const move_request& r) const {
  if (o_.shape.codec) // the codec's kernel takes the layout conversion's place
    return copy_path::dma_runs;
  auto range = layers_of(r, o_.shape);
  bool h2d = r.to == tier::hbm;
  auto runs = dram_runs(r.moves, h2d, range.count == o_.shape.layers).size();
  uint64_t bytes = uint64_t{r.moves.size()} * range.count * o_.shape.layer_bytes;
  return choose_path(h2d ? costs_.h2d : costs_.d2h, runs, r.moves.size(), bytes, kernels_welcome(h2d),
                     r.spare_sms || o_.compute_shares_gpu);
}

void gpu_mover::write_slot(tier t, uint32_t slot, std::span<const std::byte> block) {
  const auto& l = layout(t);
  KVTIER_CHECK(slot < l.slots && block.size() == l.block_bytes(), "write_slot: slot or size out of range");
  if (t == tier::dram) {
    std::memcpy(dram_ + l.offset(slot, 0), block.data(), block.size());
    return;
  }
  must(cudaSetDevice(o_.device), "cudaSetDevice");
  must(cudaMemcpy2D(static_cast<std::byte*>(hbm_) + l.offset(slot, 0), l.slots * l.layer_bytes, block.data(),
                    l.layer_bytes, l.layer_bytes, l.layers, cudaMemcpyHostToDevice),
       "write_slot");
}

void gpu_mover::read_slot(tier t, uint32_t slot, std::span<std::byte> block) {
  const auto& l = layout(t);
  KVTIER_CHECK(slot < l.slots && block.size() == l.block_bytes(), "read_slot: slot or size out of range");
  if (t == tier::dram) {
    std::memcpy(block.data(), dram_ + l.offset(slot, 0), block.size());
    return;
  }
  must(cudaSetDevice(o_.device), "cudaSetDevice");
  must(cudaMemcpy2D(block.data(), l.layer_bytes, static_cast<std::byte*>(hbm_) + l.offset(slot, 0),
                    l.slots * l.layer_bytes, l.layer_bytes, l.layers, cudaMemcpyDeviceToHost),
       "read_slot");
}

} // namespace gpu

gpu_probe probe_gpu(int device) {
  gpu_probe p;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear it: the process goes on without a GPU
    p.reason = "no usable GPU: " + gpu::cuda_text("cudaGetDeviceCount", e);
    return p;
  }
  p.device_count = count;
  if (count == 0) {
    p.reason = "no usable GPU: the CUDA runtime sees no device";
    return p;
  }
  if (device < 0 || device >= count) {
    p.reason = "no usable GPU: device " + std::to_string(device) + " asked for, " + std::to_string(count) + " present";
    return p;
  }
  cudaDeviceProp prop{};
  if ((e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess || (e = cudaSetDevice(device)) != cudaSuccess ||
      (e = cudaFree(nullptr)) != cudaSuccess) {
    cudaGetLastError();
    p.reason = "no usable GPU: " + gpu::cuda_text("device init", e);
    return p;
  }
  p.usable = true;
  p.device_name = prop.name;
  return p;
}

std::unique_ptr<tier_mover> make_cuda_mover(const mover_options& options, std::string* why) {
  auto p = probe_gpu(options.device);
  if (!p.usable) {
    if (why)
      *why = p.reason;
    return nullptr;
  }
  return std::make_unique<gpu::gpu_mover>(options, p.device_name);
}

} // namespace kvtier::copy