#pragma once
// tier_mover: moves whole KV blocks (or a layer range of them) between the
// HBM pool and the DRAM pool, converting layouts on the way. CAF-free, so the
// CUDA build and its tests need no actor system; real/copy_engine.hpp wraps it in
// kvtier::copy_engine (actors/seam.hpp) for the actors.
//
// Two implementations with this one interface:
//   cuda_mover  (kernels/copy/cuda/): HBM = cudaMalloc, DRAM = cudaHostAlloc;
//               one lane per direction (streams, staging, issue thread,
//               completion thread), several copy paths and a chooser.
//   cpu_mover   (cpu_mover.hpp): HBM = ordinary memory, DRAM = page-aligned
//               memory; memcpy on a thread pool. Same bytes, same callbacks.
//
// Invariants:
//  - HBM is layer-major, DRAM block-major (runtime/tier_layout.hpp); both pools
//    have the same layers and layer_bytes (DRAM's are the packed size with a
//    codec); layer_bytes is a multiple of 16.
//  - The DRAM pool's base is 4 KiB aligned (the NVMe page store registers it).
//  - submit() returns at once; `done` runs exactly once per request, on a
//    thread of the mover, after every byte has landed.
//  - The caller owns the slots named in a request until `done` runs; the mover
//    touches no other slot.

#include "kernels/quant/offload_codec.hpp"
#include "runtime/tier.hpp"
#include "runtime/tier_layout.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kvtier::copy {

struct slot_pair {
  uint32_t from_slot;
  uint32_t to_slot;
};

/// How a request's bytes cross the link. `automatic` lets the chooser decide.
enum class copy_path : uint8_t {
  automatic,
  dma_runs,    // one cudaMemcpyAsync per run of adjacent DRAM slots, layout change on the GPU
  dma_batch,   // the same runs in one cudaMemcpyBatchAsync
  dma_2d,      // one strided cudaMemcpy2DAsync per block, straight into the layer-major pool (no SMs)
  host_staged, // CPU threads pack blocks into a pinned staging chunk; one DMA per chunk
  sm_copy,     // a copy kernel over mapped pinned memory (takes SMs from compute)
  host_memcpy, // the CPU twin: memcpy on a thread pool
  /// Each chunk's blocks split between dma_batch and sm_copy, running at once
  /// on separate streams: the DMA engine alone stalls between small copies
  /// (per-copy cost) and the kernel alone tops out below the link; together
  /// they keep the link full. The share taken by DMA is calibrated.
  split,
};
const char* to_string(copy_path p);

struct move_request {
  tier from = tier::hbm;
  tier to = tier::dram;
  std::vector<slot_pair> moves;
  uint32_t first_layer = 0; // layer streaming: move layers [first_layer, first_layer + layer_count)
  uint32_t layer_count = 0; // 0 = all layers from first_layer on
  uint64_t tag = 0;
  copy_path path = copy_path::automatic;
  /// The transfer runs beside the model's compute (a prefetch, layer
  /// streaming, demote-ahead): no copy kernels; strided DMA (dma_2d), or
  /// batched DMA where strided costs over twice as much (small blocks). On the
  /// H200 beside a bf16 GEMM, kernel-assisted paths fell to 13-17 GB/s (their
  /// kernels wait for SMs) while dma_2d kept 49 GB/s at 2 MiB blocks.
  bool spare_sms = false;
};

struct move_result {
  uint64_t tag = 0;
  uint64_t bytes = 0;
  copy_path path = copy_path::automatic;
  bool ok = true;
  std::string error; // empty when ok
};
using move_callback = std::function<void(const move_result&)>;

/// Cumulative counters of one direction.
struct link_stats {
  uint64_t bytes = 0;         // what crossed the link (packed with a codec)
  uint64_t logical_bytes = 0; // the same blocks' slices in HBM's own size
  uint64_t operations = 0;    // link operations issued (DMAs or kernel launches)
  uint64_t requests = 0;
  double busy_seconds = 0; // time with a request in flight: the union of issue-to-completion spans
  /// Time the link itself spent on the requests: on the GPU mover the union of
  /// each request's span on its streams (timing events: its first operation
  /// starting to its last finishing), without the host's issuing and waiting
  /// around it; 0 on the CPU mover (its copies are the busy span itself).
  double link_seconds = 0;
  /// Where a request's host span goes beyond its stream span (GPU mover; sums
  /// over requests, so divide by `requests`): the issue thread's own calls
  /// (pickup to the request handed to the completion thread: its last operation
  /// queued, or host-staged D2H's unpacking done), the pickup to the first operation
  /// starting on the GPU, and the last operation ending to the completion
  /// thread seeing it. The last two put the GPU's timing events on the host's
  /// clock (anchored when the lane starts).
  double issue_seconds = 0;
  double start_lag_seconds = 0;
  double end_lag_seconds = 0;
  /// The same by the path that moved each request (indexed by copy_path's
  /// value; link seconds here are the host span where not measured apart).
  static constexpr size_t paths = 8;
  std::array<uint64_t, paths> requests_by_path{};
  std::array<uint64_t, paths> bytes_by_path{};
  std::array<double, paths> link_seconds_by_path{};
};

struct pool_shape {
  uint32_t hbm_slots = 0;
  uint32_t dram_slots = 0;
  uint32_t layers = 1;
  uint64_t layer_bytes = 0; // one block's slice of one layer
  /// Quantize-on-offload: each slice is encoded on its way to DRAM and
  /// decoded on its way back, so DRAM slots (and the bytes on the link) are
  /// the packed size. Its raw_bytes() must equal layer_bytes. The GPU mover
  /// then uses staged DMA only (dma_runs or dma_batch), the codec's kernel in
  /// place of the layout conversion; the CPU twin encodes as it copies.
  std::optional<quant::offload_codec> codec;
  uint64_t block_bytes() const { return layer_bytes * layers; }
  uint64_t dram_layer_bytes() const { return codec ? codec->packed_bytes() : layer_bytes; }
  uint64_t dram_block_bytes() const { return dram_layer_bytes() * layers; }
};

/// Cost of one path in one direction: seconds = runs * per_run_us + bytes / gbps.
struct path_cost {
  double per_run_us = 0;
  double gbps = 0; // 0 = path unavailable
};

struct direction_costs {
  path_cost dma_runs;
  path_cost dma_batch;
  path_cost dma_2d; // runs = blocks (one strided DMA each)
  path_cost host_staged;
  path_cost sm_copy;
  path_cost split;
  /// Fraction of a split chunk's blocks that go by DMA (the rest by kernel).
  double split_dma_share = 0.4;
  const path_cost& of(copy_path p) const;
  path_cost& of(copy_path p);
};

struct mover_costs {
  direction_costs h2d;
  direction_costs d2h;
  bool measured = false;     // false: defaults or a hardware profile's figures
  uint32_t dma_streams = 0;  // streams the DMA paths use (calibrated or configured)
  uint32_t sm_copy_ctas = 0; // CTAs the mapped-memory kernel uses
};

struct mover_options {
  pool_shape shape;
  int device = 0;
  /// Threads per direction that pack and unpack host staging (0 = auto:
  /// half the cores, 2..8). The CPU twin uses them as its copy pool.
  uint32_t host_threads = 0;
  /// Bytes per staging chunk; two per direction (double buffering) in HBM and
  /// in pinned DRAM. 16 MiB is ~0.3 ms on the link: long enough to hide the
  /// per-chunk host sync, short enough that a small request starts fast (and
  /// host staging ran faster at 16 MiB than at 4, 8, 32 or 64 on the H200).
  uint64_t chunk_bytes = 16ull << 20;
  /// Streams per direction that DMA paths spread a chunk's copies over, so
  /// several copy engines share the per-copy cost (0 = calibration picks, at
  /// most dma_streams_beside_compute(); 2 without calibration).
  uint32_t dma_streams = 0;
  /// CTAs of the layout-converting kernel (HBM <-> HBM staging). It runs at
  /// HBM speed for a fraction of the link time; fewer CTAs leave the SMs to compute.
  uint32_t convert_ctas = 16;
  /// CTAs of the copy kernel over mapped memory; calibration lowers it to
  /// the fewest that fill the link (8 on the H200).
  uint32_t sm_copy_ctas = 16;
  /// Let the chooser take the kernel-assisted paths (sm_copy, split) for
  /// on-demand transfers, and only while the other direction is idle;
  /// requests with `spare_sms` never take them. On the H200 they lift 32 KiB
  /// blocks from ~60% to ~90% of the link but cost a concurrent bf16 GEMM up
  /// to 6-9% (16% with kernels in both directions): `[copy] kernels = "never"`.
  bool allow_sm_copy = true;
  /// A model's kernels share the GPU: every request is chosen as `spare_sms`
  /// ones are, including the promotions a request waits on. Beside a forward
  /// pass the staged paths' scatter kernel waits for SMs: promotions in a real
  /// run on the H200 crossed at 14.3 GB/s GPU-timed, 28% of the link.
  bool compute_shares_gpu = false;
  /// The mapped-memory kernel moves data with Hopper's bulk copies (TMA)
  /// instead of 16-byte loads and stores (sm_90 and later).
  bool bulk_copy = false;
  /// Measure every path's cost at start-up (overwrites pool contents).
  bool calibrate = true;
  /// Costs to use instead of measuring (from a hardware profile).
  std::optional<mover_costs> costs;
};

class tier_mover {
public:
  virtual ~tier_mover() = default;

  /// "cuda:0 NVIDIA H200" or "cpu (N threads)".
  virtual std::string name() const = 0;
  virtual bool on_gpu() const = 0;

  // REQUIRES: from != to, both hbm or dram; slots in range; no slot twice.
  virtual void submit(move_request request, move_callback done) = 0;
  /// Blocks until every request submitted so far has completed.
  virtual void drain() = 0;

  virtual link_stats stats(tier from, tier to) const = 0;
  virtual const tier_layout& layout(tier t) const = 0;
  virtual const mover_costs& costs() const = 0;
  /// The path the chooser takes for `request` (never `automatic`).
  virtual copy_path choose(const move_request& request) const = 0;

  /// Host base of the DRAM pool (block-major, 4 KiB aligned).
  virtual std::byte* dram_base() = 0;
  /// Base of the HBM pool: a device pointer on the GPU.
  virtual void* hbm_base() = 0;

  /// Test and tooling access, synchronous: a whole block in block-major order
  /// (layer 0 first), whatever the tier's layout.
  virtual void write_slot(tier t, uint32_t slot, std::span<const std::byte> block) = 0;
  virtual void read_slot(tier t, uint32_t slot, std::span<std::byte> block) = 0;
};

/// 64-bit checksum of a block's bytes (every block carries one in tests and
/// tools; FNV-1a over 8-byte words, then a final mix).
uint64_t block_checksum(std::span<const std::byte> bytes);

} // namespace kvtier::copy
