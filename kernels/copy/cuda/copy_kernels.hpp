#pragma once
// Device-side pieces of the CUDA mover, callable from host C++ (C++17 so
// that nvcc under CMake 3.25 compiles the .cu; no CAF, no C++20).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvtier::copy::cuda {

/// Where slice (slot, layer) of a pool or staging area starts:
///   slot * slot_pitch + (layer - layer_shift) * layer_pitch.
/// Layer-major HBM: slot_pitch = layer_bytes, layer_pitch = slots * layer_bytes.
/// Block-major DRAM: slot_pitch = layers * layer_bytes, layer_pitch = layer_bytes.
/// Staging of a layer range [f, f + n): slot_pitch = n * layer_bytes, layer_pitch = layer_bytes, layer_shift = f.
struct slice_layout {
  uint64_t slot_pitch = 0;
  uint64_t layer_pitch = 0;
  uint32_t layer_shift = 0;
};

struct slice_pair {
  uint32_t from_slot;
  uint32_t to_slot;
};

/// One launch moves layers [first_layer, first_layer + layer_count) of every
/// pair: `pairs` (device memory) names the slot in `src` and in `dst`.
struct copy_slices_args {
  const slice_pair* pairs = nullptr;
  uint32_t pair_count = 0;
  const void* src = nullptr;
  slice_layout src_layout;
  void* dst = nullptr;
  slice_layout dst_layout;
  uint32_t first_layer = 0;
  uint32_t layer_count = 0;
  uint64_t layer_bytes = 0; // multiple of 16; pitches and bases 16-byte aligned
};

/// Launches the gather/scatter kernel with `ctas` CTAs of 256 threads on `stream`.
/// REQUIRES: pair_count * layer_count * layer_bytes / 16 < 2^31.
cudaError_t launch_copy_slices(const copy_slices_args& args, unsigned ctas, cudaStream_t stream);

/// The same move through Hopper's bulk copy engine (TMA, `cp.async.bulk`):
/// one thread per CTA streams runs of contiguous slices global -> shared ->
/// global, four 16 KiB stages deep, so each PCIe transfer is a run of up to
/// 16 KiB instead of 16-byte loads. sm_90 only: elsewhere it returns
/// cudaErrorNotSupported. Same requirements as launch_copy_slices.
cudaError_t launch_bulk_copy_slices(const copy_slices_args& args, unsigned ctas, cudaStream_t stream);

/// A compute-bound load for interference measurements: bf16 GEMM (cuBLAS
/// when built with it, else an FMA kernel over every SM).
class compute_load {
public:
  explicit compute_load(int n);
  ~compute_load();
  compute_load(const compute_load&) = delete;
  compute_load& operator=(const compute_load&) = delete;
  /// Runs `iterations` products on the load's stream; returns milliseconds (events).
  float run_ms(int iterations);
  const char* what() const;
  double flops_per_iteration() const;

private:
  struct impl;
  impl* impl_;
};

} // namespace kvtier::copy::cuda
