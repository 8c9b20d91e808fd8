#pragma once
// One direction of the GPU mover (DRAM -> HBM or HBM -> DRAM):
//   - an issue thread (a worker_queue of one) that takes requests in order
//     and cuts them into chunks of at most chunk_bytes (lane_issue.cpp has
//     the paths: batched or per-run DMA into staging plus the layout-convert
//     kernel, strided DMA, the copy kernel over mapped memory, split);
//   - two staging halves (HBM + pinned DRAM + descriptor buffers), so chunk
//     c+1 is packed or issued while chunk c is on the link (double buffering);
//   - a copy stream (DMA or the mapped-memory kernel), a convert stream (the
//     layout-converting kernel, HBM <-> HBM staging) and a mapped stream (the
//     kernel's share of a split chunk), ordered by events;
//   - a completion thread (another worker_queue of one) that polls each
//     request's final event, counts it and runs its callback.
// Invariants: a half is reused only after its `free` event (and, for D2H
// host staging, its CPU unpacking) has completed. A request is reported
// exactly once; drain() returns only after every pushed request was.

#include "kernels/copy/cuda/copy_kernels.hpp"
#include "kernels/copy/cuda/cuda_support.hpp"
#include "kernels/copy/mover.hpp"
#include "kernels/copy/worker_pool.hpp"
#include "runtime/mutex.hpp"
#include "runtime/worker_queue.hpp"

#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <span>
#include <string>

namespace kvtier::copy::gpu {

using cuda::slice_layout;
using cuda::slice_pair;
static_assert(sizeof(slice_pair) == sizeof(slot_pair));

// Copy engines an H200 offers per direction are few; more streams than this
// only add event traffic.
constexpr unsigned max_dma_streams = 8;

/// One request, from push to its callback.
struct job {
  move_request request;
  move_callback done;
  copy_path path = copy_path::automatic;
  clock_type::time_point start;  // the issue thread picked it up
  clock_type::time_point issued; // handed to the completion thread
  uint64_t bytes = 0;            // on the link
  uint64_t logical_bytes = 0;    // the same slices in HBM's size
  uint64_t operations = 0;
  std::string error;
  // Timing events on the streams: recorded before the first operation and
  // after the last (host-staged D2H only; the others end at their completion
  // event). nullptr where an event could not be made: the host span counts.
  cudaEvent_t gpu_begin = nullptr;
  cudaEvent_t gpu_end = nullptr;
};

/// A request whose last operation is on a stream: done once `event` has fired.
struct completion {
  cudaEvent_t event = nullptr; // nullptr: already complete
  std::unique_ptr<job> work;
};

/// One of a lane's two staging halves.
struct half_buffers {
  std::byte* dev_stage = nullptr;
  std::byte* host_stage = nullptr;
  slice_pair* dev_desc = nullptr;
  slice_pair* host_desc = nullptr;
  cudaEvent_t copied = nullptr; // the chunk's bytes are in dev_stage (H2D) / dev_stage is packed (D2H)
  cudaEvent_t mapped = nullptr; // a split chunk's kernel share has landed
  cudaEvent_t free = nullptr;   // the GPU is done with this half
};

/// D2H host staging: a chunk whose bytes wait in a half's pinned staging for
/// the CPU to unpack them into DRAM slots. (At namespace scope: clang cannot
/// default-construct a nested class with member initializers inside
/// std::optional before the enclosing class is complete.)
struct deferred_unpack {
  int half = 0;
  std::span<const slot_pair> moves;
  const job* of = nullptr;
  std::unique_ptr<job> finishing; // set on the request's last chunk
};

class gpu_mover;

class lane {
public:
  lane(gpu_mover& owner, bool to_hbm, uint32_t helper_threads);
  ~lane();
  void push(std::unique_ptr<job> j);
  /// Waits until every request pushed so far has been reported.
  void drain();
  /// Requests queued or in flight in this direction.
  bool busy() const { return requests_.pending() + completions_.pending() > 0; }
  link_stats stats() const {
    mutex_lock lock{counters_mutex_};
    return counters_;
  }

private:
  void issue(std::unique_ptr<job> j); // the issue thread's handler: run, then flush when idle
  void run(std::unique_ptr<job> j);
  void reap(completion& c);
  /// `dma_share`: for split chunks, the fraction of blocks that go by DMA.
  void issue_chunk(job& j, std::span<const slot_pair> moves, int half, double dma_share);
  /// DMA between DRAM and the half's HBM staging plus the layout-converting
  /// kernel; `also` (if set) is waited for before the half is marked free.
  void issue_staged(job& j, std::span<const slot_pair> moves, int half, copy_path how, cudaEvent_t also);
  /// The copy kernel over mapped DRAM for `moves`, descriptors at `first_desc`.
  void issue_mapped(job& j, std::span<const slot_pair> moves, int half, uint32_t first_desc, cudaStream_t stream);
  void issue_strided(job& j, std::span<const slot_pair> moves, int half);
  void flush_deferred();
  double split_share() const;
  void complete(cudaStream_t last, std::unique_ptr<job> j);
  /// Issues items [0, count) over up to dma_streams streams: issue(stream,
  /// begin, end); the extra streams fork from and join back into copy_stream_.
  template <class Issue>
  bool spread(job& j, size_t count, Issue&& issue);
  void fail(job& j, const char* what, cudaError_t e) {
    if (j.error.empty())
      j.error = cuda_text(what, e);
  }

  gpu_mover& m_;
  const bool to_hbm_;
  cudaStream_t copy_stream_ = nullptr;
  cudaStream_t convert_stream_ = nullptr;
  cudaStream_t mapped_stream_ = nullptr;
  cudaStream_t extra_[max_dma_streams - 1] = {}; // more DMA streams, joined into copy_stream_
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_[max_dma_streams - 1] = {};
  half_buffers half_[2];
  int next_half_ = 0;                       // issue thread only
  std::optional<deferred_unpack> deferred_; // issue thread only
  clock_type::time_point busy_until_{};     // completion thread only: the last reported completion
  cudaEvent_t epoch_ = nullptr;             // timing origin of the requests' stream spans
  clock_type::time_point host_epoch_{};     // epoch_ on the host's clock (seen complete at start-up)
  double link_until_ms_ = 0;                // completion thread only: the last stream span's end, from epoch_
  worker_pool pool_;

  mutable kvtier::mutex counters_mutex_;
  link_stats counters_ GUARDED_BY(counters_mutex_);
  // Last, completions before requests: the issue thread hands finished
  // requests to the completion thread, so it must stop first.
  worker_queue<completion> completions_;
  worker_queue<std::unique_ptr<job>> requests_;
};

} // namespace kvtier::copy::gpu
