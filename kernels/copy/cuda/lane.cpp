// The GPU mover's lane: set-up, the request and completion threads, and
// chunking (lane.hpp). The paths that put a chunk on the link are in
// lane_issue.cpp.

#include "kernels/copy/cuda/lane.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cuda/gpu_mover.hpp"
#include "runtime/check.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace kvtier::copy::gpu {

lane::lane(gpu_mover& owner, bool to_hbm, uint32_t helper_threads)
    : m_(owner),
      to_hbm_(to_hbm),
      pool_(helper_threads),
      completions_(
          1, [this](completion& c) { reap(c); }, [this] { must(cudaSetDevice(m_.options().device), "cudaSetDevice"); }),
      requests_(
          1, [this](std::unique_ptr<job>& j) { issue(std::move(j)); },
          [this] { must(cudaSetDevice(m_.options().device), "cudaSetDevice"); }) {
  must(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "copy stream");
  // The convert kernel is short and sits between two DMAs of the pipeline:
  // the highest priority lets its CTAs in as soon as compute CTAs retire.
  int least = 0, greatest = 0;
  must(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
  must(cudaStreamCreateWithPriority(&convert_stream_, cudaStreamNonBlocking, greatest), "convert stream");
  must(cudaStreamCreateWithFlags(&mapped_stream_, cudaStreamNonBlocking), "mapped stream");
  for (unsigned k = 0; k + 1 < max_dma_streams; ++k) {
    must(cudaStreamCreateWithFlags(&extra_[k], cudaStreamNonBlocking), "DMA stream");
    must(cudaEventCreateWithFlags(&join_[k], cudaEventDisableTiming), "event");
  }
  must(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "event");
  must(cudaEventCreate(&epoch_), "event");
  must(cudaEventRecord(epoch_, copy_stream_), "event record");
  must(cudaEventSynchronize(epoch_), "event sync");
  host_epoch_ = clock_type::now();
  uint64_t stage = m_.stage_bytes();
  size_t desc = size_t{m_.desc_capacity()} * sizeof(slice_pair);
  for (auto& h : half_) {
    must(cudaMalloc(&h.dev_stage, stage), "cudaMalloc(staging)");
    must(cudaHostAlloc(&h.host_stage, stage, cudaHostAllocPortable), "cudaHostAlloc(staging)");
    must(cudaMalloc(&h.dev_desc, desc), "cudaMalloc(descriptors)");
    must(cudaHostAlloc(&h.host_desc, desc, cudaHostAllocPortable), "cudaHostAlloc(descriptors)");
    must(cudaEventCreateWithFlags(&h.copied, cudaEventDisableTiming), "event");
    must(cudaEventCreateWithFlags(&h.mapped, cudaEventDisableTiming), "event");
    must(cudaEventCreateWithFlags(&h.free, cudaEventDisableTiming), "event");
    must(cudaEventRecord(h.free, copy_stream_), "event record");
  }
}

lane::~lane() {
  requests_.close(); // finishes what was pushed, and hands it to completions_
  completions_.close();
  cudaStreamSynchronize(copy_stream_);
  cudaStreamSynchronize(convert_stream_);
  cudaStreamSynchronize(mapped_stream_);
  for (auto& h : half_) {
    cudaFree(h.dev_stage);
    cudaFreeHost(h.host_stage);
    cudaFree(h.dev_desc);
    cudaFreeHost(h.host_desc);
    cudaEventDestroy(h.copied);
    cudaEventDestroy(h.mapped);
    cudaEventDestroy(h.free);
  }
  for (unsigned k = 0; k + 1 < max_dma_streams; ++k) {
    cudaStreamSynchronize(extra_[k]);
    cudaStreamDestroy(extra_[k]);
    cudaEventDestroy(join_[k]);
  }
  cudaEventDestroy(fork_);
  cudaEventDestroy(epoch_);
  cudaStreamDestroy(copy_stream_);
  cudaStreamDestroy(convert_stream_);
  cudaStreamDestroy(mapped_stream_);
}

double lane::split_share() const {
  const auto& c = m_.costs();
  return to_hbm_ ? c.h2d.split_dma_share : c.d2h.split_dma_share;
}

void lane::push(std::unique_ptr<job> j) {
  bool queued = requests_.push(std::move(j));
  KVTIER_CHECK(queued, "a request pushed to a lane that is closing");
}

void lane::drain() {
  requests_.drain(); // every request issued (its last handler found the queue empty and flushed)
  completions_.drain();
}

void lane::issue(std::unique_ptr<job> j) {
  run(std::move(j));
  // Nothing else queued (this request is the one pending): finish the last
  // chunk's host work now rather than with the next request's first chunk.
  // Every path out of run() passes here, so drain() never waits on it.
  if (deferred_ && requests_.pending() == 1)
    flush_deferred();
}

void lane::run(std::unique_ptr<job> j) {
  const auto& shape = m_.options().shape;
  auto& r = j->request;
  auto range = layers_of(r, shape);
  uint64_t sel = uint64_t{range.count} * shape.dram_layer_bytes(); // bytes of a block on the link
  copy_path path = r.path == copy_path::automatic ? m_.choose(r) : r.path;
  if (path == copy_path::host_memcpy)
    path = copy_path::host_staged;
  if (shape.codec && path != copy_path::dma_batch) // only staged DMA runs the codec
    path = copy_path::dma_runs;
  j->path = path;
  j->start = clock_type::now();
  j->bytes = r.moves.size() * sel;
  j->logical_bytes = r.moves.size() * range.count * shape.layer_bytes;
  const uint32_t desc_chunk = std::max(m_.desc_capacity() / range.count, 1u);
  uint32_t per_chunk = std::max(std::min(blocks_per_chunk(m_.stage_bytes(), sel), desc_chunk), 1u);
  if (path == copy_path::sm_copy) // no staging: one launch per descriptor buffer
    per_chunk = desc_chunk;
  // A split chunk: staging holds its DMA share, the kernel takes the rest.
  const auto split_chunk =
      static_cast<uint32_t>(std::clamp<double>(per_chunk / std::max(split_share(), 0.05), per_chunk, desc_chunk));
  // Strided DMA uses neither staging nor descriptors: the whole request is queued at once, with no
  // host wait on an earlier chunk's staging half between its copies.
  if (path == copy_path::dma_2d)
    per_chunk = std::max<uint32_t>(static_cast<uint32_t>(r.moves.size()), 1u);
  std::span<const slot_pair> all{r.moves};
  bool staged_d2h = !to_hbm_ && path == copy_path::host_staged;
  if (all.empty()) {
    complete(nullptr, std::move(j));
    return;
  }
  if (cudaEventCreate(&j->gpu_begin) != cudaSuccess || cudaEventRecord(j->gpu_begin, copy_stream_) != cudaSuccess) {
    if (j->gpu_begin)
      cudaEventDestroy(j->gpu_begin);
    j->gpu_begin = nullptr;
  }
  for (size_t first = 0; first < all.size();) {
    // Split decides chunk by chunk: all by DMA while the other direction is busy.
    bool kernel_share = path == copy_path::split && !m_.other_direction_busy(to_hbm_);
    double dma_share = kernel_share ? split_share() : 1.0;
    auto moves = all.subspan(first, std::min<size_t>(kernel_share ? split_chunk : per_chunk, all.size() - first));
    first += moves.size();
    bool last = first == all.size();
    int h = next_half_;
    next_half_ ^= 1;
    if (j->error.empty())
      issue_chunk(*j, moves, h, dma_share);
    if (deferred_)
      flush_deferred(); // the previous chunk's CPU unpacking overlaps this chunk on the link
    if (staged_d2h && j->error.empty()) {
      deferred_.emplace();
      deferred_->half = h;
      deferred_->moves = moves;
      deferred_->of = j.get();
      if (last) {
        // The link's part ends with this chunk's DMA into staging; the CPU unpacks after it.
        if (cudaEventCreate(&j->gpu_end) != cudaSuccess || cudaEventRecord(j->gpu_end, copy_stream_) != cudaSuccess) {
          if (j->gpu_end)
            cudaEventDestroy(j->gpu_end);
          j->gpu_end = nullptr;
        }
        deferred_->finishing = std::move(j);
      }
    } else if (last) {
      bool copy_only = path == copy_path::sm_copy || path == copy_path::dma_2d || !to_hbm_;
      complete(copy_only ? copy_stream_ : convert_stream_, std::move(j));
    }
  }
}

// D2H host staging: once the chunk's DMA into pinned staging has landed,
// CPU threads unpack it into the DRAM slots.
void lane::flush_deferred() {
  auto d = std::move(*deferred_);
  deferred_.reset();
  const auto& shape = m_.options().shape;
  auto range = layers_of(d.of->request, shape);
  uint64_t sel = uint64_t{range.count} * shape.layer_bytes;
  auto& hb = half_[d.half];
  cudaError_t e = cudaEventSynchronize(hb.free);
  if (e == cudaSuccess) {
    pool_.parallel_for(d.moves.size(), [&](size_t i) {
      std::byte* dst =
          m_.dram() + uint64_t{d.moves[i].to_slot} * shape.block_bytes() + uint64_t{range.first} * shape.layer_bytes;
      std::memcpy(dst, hb.host_stage + i * sel, sel);
    });
  } else if (d.finishing) {
    fail(*d.finishing, "staging wait", e);
  }
  if (d.finishing)
    complete(nullptr, std::move(d.finishing));
}

void lane::complete(cudaStream_t last, std::unique_ptr<job> j) {
  completion c;
  c.work = std::move(j);
  c.work->issued = clock_type::now();
  if (last != nullptr && c.work->error.empty()) {
    cudaError_t e = cudaEventCreate(&c.event); // timed: it ends the request's stream span
    if (e == cudaSuccess)
      e = cudaEventRecord(c.event, last);
    if (e != cudaSuccess) {
      fail(*c.work, "completion event", e);
      if (c.event)
        cudaEventDestroy(c.event);
      c.event = nullptr;
    }
  }
  bool queued = completions_.push(std::move(c));
  KVTIER_CHECK(queued, "a completion after the lane closed");
}

void lane::reap(completion& c) {
  auto& j = *c.work;
  if (c.event) {
    // Polled, not a blocking sync: waking from one took long enough to cost
    // a few percent of a 128 MiB request's link time (and beside the model a
    // blocking sync gained nothing: docs/slot_placement.md).
    cudaError_t e;
    while ((e = cudaEventQuery(c.event)) == cudaErrorNotReady)
      std::this_thread::yield();
    if (e != cudaSuccess)
      fail(j, "transfer", e);
  }
  // Busy is the union of the requests' issue-to-completion spans: the issue
  // thread starts request k+1 while k is still on the link, and summing the
  // spans counted that overlap twice (a demotion-heavy run reported a third
  // of the link's rate "while busy"). Completions arrive in issue order.
  const auto end = clock_type::now();
  const auto begin = std::max(j.start, busy_until_);
  double seconds = end > begin ? std::chrono::duration<double>(end - begin).count() : 0.0;
  busy_until_ = std::max(busy_until_, end);
  double link_seconds = seconds; // without timing events: the host's span
  double start_lag = 0, end_lag = 0;
  cudaEvent_t gpu_end = c.event ? c.event : j.gpu_end;
  float begin_ms = 0, end_ms = 0;
  if (j.gpu_begin && gpu_end && cudaEventSynchronize(gpu_end) == cudaSuccess &&
      cudaEventElapsedTime(&begin_ms, epoch_, j.gpu_begin) == cudaSuccess &&
      cudaEventElapsedTime(&end_ms, epoch_, gpu_end) == cudaSuccess) {
    const double from = std::max<double>(begin_ms, link_until_ms_);
    link_seconds = end_ms > from ? (end_ms - from) * 1e-3 : 0.0;
    link_until_ms_ = std::max<double>(link_until_ms_, end_ms);
    auto on_host = [&](float ms) { return host_epoch_ + std::chrono::duration<double, std::milli>(ms); };
    start_lag = std::max(0.0, std::chrono::duration<double>(on_host(begin_ms) - j.start).count());
    end_lag = std::max(0.0, std::chrono::duration<double>(end - on_host(end_ms)).count());
  }
  for (cudaEvent_t ev : {c.event, j.gpu_begin, j.gpu_end})
    if (ev)
      cudaEventDestroy(ev);
  c.event = j.gpu_begin = j.gpu_end = nullptr;
  {
    mutex_lock lock{counters_mutex_};
    counters_.bytes += j.error.empty() ? j.bytes : 0;
    counters_.logical_bytes += j.error.empty() ? j.logical_bytes : 0;
    counters_.operations += j.operations;
    counters_.requests += 1;
    counters_.busy_seconds += seconds;
    counters_.link_seconds += link_seconds;
    counters_.issue_seconds += std::chrono::duration<double>(j.issued - j.start).count();
    counters_.start_lag_seconds += start_lag;
    counters_.end_lag_seconds += end_lag;
    if (const auto p = static_cast<size_t>(j.path); p < link_stats::paths) {
      counters_.requests_by_path[p] += 1;
      counters_.bytes_by_path[p] += j.error.empty() ? j.bytes : 0;
      counters_.link_seconds_by_path[p] += link_seconds;
    }
  }
  if (j.done) {
    move_result res{j.request.tag, j.error.empty() ? j.bytes : 0, j.path, j.error.empty(), j.error};
    j.done(res);
  }
}

} // namespace kvtier::copy::gpu
