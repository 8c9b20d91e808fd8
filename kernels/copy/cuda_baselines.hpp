#pragma once
// Reference measurements against which the mover is judged (bench/transfer,
// `kvtier calibrate`): plain CUDA copies over raw pool pointers, the copy
// kernel over mapped memory at a chosen CTA count, and a compute load to
// measure how much a transfer slows the model. CUDA-free header; built only
// with CUDA. GB/s are 1e9 bytes per second.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::copy::baseline {

enum class direction { h2d, d2h, both };

/// Blocks of `block_bytes` to move: block i goes between host slot
/// host_slots[i] and device slot dev_slots[i] (offsets = slot * block_bytes).
struct block_list {
  std::vector<uint32_t> host_slots;
  std::vector<uint32_t> dev_slots;
  uint64_t block_bytes = 0;
};

/// (a) One cudaMemcpyAsync of `bytes` per direction (`both`: one each way at
/// once on two streams; the figure is the total). Median of `reps`. Timed by
/// CUDA events (GPU time only), or with `wall_clock` from the first enqueue
/// until the host sees the streams idle, as the mover's requests are timed.
double contiguous_gbps(void* dev, std::byte* host, uint64_t bytes, direction d, int reps, bool wall_clock = false);

/// (b) One cudaMemcpyAsync per block. `both`: `up` H2D and `down` D2H at once.
double per_block_gbps(void* dev, std::byte* host, const block_list& up, const block_list& down, direction d, int reps);

/// (c) All blocks of a direction in one cudaMemcpyBatchAsync.
/// `driver_picks`: no PreferOverlapWithCompute hint and any source order, so
/// the driver may copy with SMs.
double batched_gbps(void* dev, std::byte* host, const block_list& up, const block_list& down, direction d, int reps,
                    bool driver_picks = false);

/// The gather/scatter kernel over mapped pinned memory with `ctas` CTAs.
double sm_copy_gbps(void* dev, std::byte* host, const block_list& blocks, direction d, unsigned ctas, int reps);

/// The same kernel HBM -> HBM (the mover's layout conversion), counting the
/// bytes moved once (not read + written).
double hbm_copy_gbps(void* dev, uint64_t bytes, unsigned ctas, int reps);

/// A compute load (bf16 GEMM n x n x n through cuBLAS when built with it).
class compute_probe {
public:
  explicit compute_probe(int n);
  ~compute_probe();
  /// Milliseconds for `iterations` products, median of `reps` runs.
  double run_ms(int iterations, int reps);
  double tflops(double ms, int iterations) const;
  const char* what() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// Device name, SMs, PCIe generation/width as the driver reports them.
std::string describe_device(int device);

} // namespace kvtier::copy::baseline
