#pragma once
// Peer block copy: scattered KV blocks of one GPU's paged pool into given
// slots of another GPU's pool (a prefill GPU handing a request to a decode
// GPU), free of CUDA types so that any code may include this header.
//
// Two implementations with this one interface:
//   CUDA (kernels/copy/cuda/peer_copier.cpp): both pools in device memory of
//        two GPUs with peer access (NVLink, or PCIe peer-to-peer); one copy
//        kernel over the request's coalesced runs (peer_path::kernel), or one
//        cudaMemcpyPeerAsync per run (peer_path::dma) for comparison.
//   CPU twin (make_host_peer_copier): both pools in host memory, memcpy per
//        run. The same planning, the same bytes: CI checks it.
//
// Invariants:
//  - Both pools have the same layers and layer_bytes (a multiple of 16) and
//    16-byte aligned bases; their slot counts and orders (tier_layout) may
//    differ.
//  - A request names each destination slot at most once; a source slot may
//    go to several destinations.
//  - copy() returns after every byte has landed (or with the error): the
//    destination's blocks may then be read by anyone on either device.
//  - The copier touches only the destination slots the request names.

#include "kernels/copy/mover.hpp"
#include "runtime/tier_layout.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::copy {

/// One paged pool as the copier sees it: device memory of its GPU (host
/// memory for the CPU twin) and where each slot's layers lie.
struct peer_pool {
  std::byte* base = nullptr;
  tier_layout layout;
};

struct peer_request {
  peer_pool from;
  peer_pool to;
  std::vector<slot_pair> moves; // (slot in `from`, slot in `to`)
  uint32_t first_layer = 0;     // move layers [first_layer, first_layer + layer_count)
  uint32_t layer_count = 0;     // 0 = all layers from first_layer on
};

struct peer_result {
  bool ok = true;
  std::string error; // empty when ok
  uint64_t bytes = 0;
  uint64_t runs = 0;       // contiguous byte ranges after coalescing
  uint64_t operations = 0; // kernel launches or DMAs issued
  double plan_seconds = 0; // the host's planning: the request's check, its runs and pieces
  double seconds = 0;      // first CUDA call (or memcpy) to landed, as the caller waits for it
};

/// How the CUDA copier moves the runs.
enum class peer_path : uint8_t {
  /// One kernel reads each run and writes it across the link with 16-byte
  /// accesses: one launch whatever the number of runs. The default: a
  /// scattered handoff is thousands of 64 KiB slices, and a DMA per slice
  /// costs microseconds of issue each, far more than its bytes on NVLink.
  kernel,
  /// One cudaMemcpyPeerAsync per run on the copy engines: no SMs taken, but
  /// a per-copy cost; worth it only for long runs. Works without peer access
  /// too (the driver stages through the host).
  dma,
};
const char* to_string(peer_path p);

struct peer_options {
  int from_device = 0;
  int to_device = 1;
  peer_path path = peer_path::kernel;
  /// Where the kernel runs: false = on the source GPU, writing across the
  /// link (it has finished prefill; the decode GPU keeps its SMs); true = on
  /// the destination GPU, reading across the link.
  bool pull = false;
  uint32_t ctas = 0; // kernel CTAs (0 = two per multiprocessor)
  // from_device == to_device is a rehearsal on one GPU (both pools on it, no
  // peer access): everything but the link is exercised.
};

class peer_copier {
public:
  virtual ~peer_copier() = default;
  /// "cuda:0->cuda:1 kernel (push)" or "host".
  virtual std::string name() const = 0;
  virtual peer_result copy(const peer_request& request) = 0;
};

/// The CPU twin: both pools in host memory.
std::unique_ptr<peer_copier> make_host_peer_copier();

/// The CUDA copier, or nullptr with `why` filled in (no CUDA in this build,
/// a device number out of range, or, for the kernel, no peer access from the
/// device it runs on). Enables peer access both ways where the devices allow;
/// from_device == to_device is the one-GPU rehearsal and needs none.
std::unique_ptr<peer_copier> make_cuda_peer_copier(const peer_options& options, std::string* why);

} // namespace kvtier::copy
