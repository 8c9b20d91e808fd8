// The GPU mover. Host C++20 over the CUDA runtime; the kernels live in
// copy_kernels.cu.
//
// One lane per direction, each with:
//   - an issue thread that takes requests in order and cuts them into chunks
//     of at most chunk_bytes;
//   - two staging halves (HBM + pinned DRAM + descriptor buffers), so chunk
//     c+1 is packed or issued while chunk c is on the link (double buffering);
//   - a copy stream (DMA or the mapped-memory kernel), a convert stream (the
//     layout-converting kernel, HBM <-> HBM staging) and a mapped stream (the
//     kernel's share of a split chunk), ordered by events;
//   - a completion thread that polls each request's final event (yielding
//     between polls; it sleeps on a condition variable when nothing is in
//     flight) and runs its callback.
// Invariant: a half is reused only after its `free` event (and, for D2H
// host staging, its CPU unpacking) has completed.

#include "kernels/copy/cuda_mover.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cuda/copy_kernels.hpp"
#include "kernels/copy/worker_pool.hpp"
#include "runtime/check.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <future>
#include <mutex>
#include <numeric>
#include <random>
#include <optional>
#include <thread>

namespace kvtier::copy {
namespace {

using cuda::slice_layout;
using cuda::slice_pair;
static_assert(sizeof(slice_pair) == sizeof(slot_pair));

std::string cuda_text(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kvtier: bug or broken GPU: %s\n", cuda_text(what, e).c_str());
    std::abort();
  }
}

using clock_type = std::chrono::steady_clock;

// Copy engines an H200 offers per direction are few; more streams than this
// only add event traffic.
constexpr unsigned max_dma_streams = 8;

struct job {
  move_request request;
  move_callback done;
  copy_path path = copy_path::automatic;
  clock_type::time_point start;
  uint64_t bytes = 0;
  uint64_t operations = 0;
  std::string error;
};

struct completion {
  cudaEvent_t event = nullptr; // nullptr: already complete
  std::unique_ptr<job> work;
};

struct half_buffers {
  std::byte* dev_stage = nullptr;
  std::byte* host_stage = nullptr;
  slice_pair* dev_desc = nullptr;
  slice_pair* host_desc = nullptr;
  cudaEvent_t copied = nullptr; // the chunk's bytes are in dev_stage (H2D) / dev_stage is packed (D2H)
  cudaEvent_t mapped = nullptr; // a split chunk's kernel share has landed
  cudaEvent_t free = nullptr;   // the GPU is done with this half
};

class cuda_mover;

class lane {
public:
  lane(cuda_mover& owner, bool to_hbm, uint32_t helper_threads);
  ~lane();
  void push(std::unique_ptr<job> j);
  void drain();
  /// Requests queued or in flight in this direction.
  bool busy() const {
    std::lock_guard lock{mutex_};
    return outstanding_ > 0;
  }
  link_stats stats() const {
    std::lock_guard lock{mutex_};
    return counters_;
  }

private:
  struct deferred_unpack {
    int half = 0;
    std::span<const slot_pair> moves;
    const job* of = nullptr;
    std::unique_ptr<job> finishing; // set on the request's last chunk
  };

  void issue_loop();
  void completion_loop();
  void run(std::unique_ptr<job> j);
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

  cuda_mover& m_;
  const bool to_hbm_;
  cudaStream_t copy_stream_ = nullptr;
  cudaStream_t convert_stream_ = nullptr;
  cudaStream_t mapped_stream_ = nullptr;
  cudaStream_t extra_[max_dma_streams - 1] = {}; // more DMA streams, joined into copy_stream_
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_[max_dma_streams - 1] = {};
  half_buffers half_[2];
  int next_half_ = 0;                      // issue thread only
  std::optional<deferred_unpack> deferred_; // issue thread only
  worker_pool pool_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable reaped_;
  std::condition_variable idle_;
  std::deque<std::unique_ptr<job>> queue_; // GUARDED_BY(mutex_)
  std::deque<completion> completions_;     // GUARDED_BY(mutex_)
  uint64_t outstanding_ = 0;               // GUARDED_BY(mutex_)
  bool stopping_ = false;                  // GUARDED_BY(mutex_)
  link_stats counters_;                    // GUARDED_BY(mutex_)
  std::thread issue_thread_;
  std::thread completion_thread_;
};

class cuda_mover final : public tier_mover {
public:
  cuda_mover(const mover_options& o, std::string device_name)
    : o_(o),
      device_name_(std::move(device_name)),
      hbm_layout_{slot_order::layer_major, o.shape.hbm_slots, o.shape.layers, o.shape.layer_bytes},
      dram_layout_{slot_order::block_major, o.shape.dram_slots, o.shape.layers, o.shape.layer_bytes},
      costs_(o.costs ? *o.costs : costs_from_profile(pcie_profile{})),
      sm_ctas_(o.sm_copy_ctas),
      dma_streams_(o.dma_streams == 0 ? 2 : std::min(o.dma_streams, max_dma_streams)) {
    KVTIER_CHECK(o.shape.layers > 0 && o.shape.layer_bytes > 0, "pool shape needs layers and layer_bytes");
    KVTIER_CHECK(o.shape.layer_bytes % 16 == 0, "layer_bytes must be a multiple of 16");
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
    if (o.calibrate && !o.costs)
      calibrate();
  }

  ~cuda_mover() override {
    // Both lanes idle before either goes: a busy lane's chooser asks the other one.
    drain();
    lanes_[0].reset();
    lanes_[1].reset();
    cudaFree(hbm_);
    cudaFreeHost(dram_raw_);
  }

  std::string name() const override { return "cuda:" + std::to_string(o_.device) + " " + device_name_; }
  bool on_gpu() const override { return true; }

  void submit(move_request request, move_callback done) override {
    auto problem = check_request(request, o_.shape);
    KVTIER_CHECK(problem.empty(), problem.c_str());
    auto j = std::make_unique<job>();
    j->request = std::move(request);
    j->done = std::move(done);
    bool to_hbm = j->request.to == tier::hbm;
    lanes_[to_hbm ? 0 : 1]->push(std::move(j));
  }

  void drain() override {
    lanes_[0]->drain();
    lanes_[1]->drain();
  }

  link_stats stats(tier from, tier) const override { return lanes_[from == tier::dram ? 0 : 1]->stats(); }
  const tier_layout& layout(tier t) const override { return t == tier::hbm ? hbm_layout_ : dram_layout_; }
  const mover_costs& costs() const override { return costs_; }

  copy_path choose(const move_request& r) const override {
    auto range = layers_of(r, o_.shape);
    bool h2d = r.to == tier::hbm;
    auto runs = dram_runs(r.moves, h2d, range.count == o_.shape.layers).size();
    uint64_t bytes = uint64_t{r.moves.size()} * range.count * o_.shape.layer_bytes;
    return choose_path(h2d ? costs_.h2d : costs_.d2h, runs, r.moves.size(), bytes, kernels_welcome(h2d), r.spare_sms);
  }

  /// Kernel-assisted paths only while the other direction is idle: with
  /// copy kernels in both directions a concurrent GEMM slowed by 16% on the
  /// H200, and DMA alone moved more both ways at 256 KiB and 2 MiB blocks.
  bool kernels_welcome(bool to_hbm) const { return o_.allow_sm_copy && !other_direction_busy(to_hbm); }
  bool other_direction_busy(bool to_hbm) const { return lanes_[to_hbm ? 1 : 0]->busy(); }

  std::byte* dram_base() override { return dram_; }
  void* hbm_base() override { return hbm_; }

  void write_slot(tier t, uint32_t slot, std::span<const std::byte> block) override {
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

  void read_slot(tier t, uint32_t slot, std::span<std::byte> block) override {
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

  // -- for the lanes ------------------------------------------------------

  const mover_options& options() const { return o_; }
  uint64_t stage_bytes() const { return stage_bytes_; }
  uint32_t desc_capacity() const { return desc_capacity_; }
  std::byte* hbm() const { return static_cast<std::byte*>(hbm_); }
  std::byte* dram() const { return dram_; }
  std::byte* dram_device() const { return static_cast<std::byte*>(dram_dev_); }
  unsigned sm_ctas() const { return sm_ctas_; }
  unsigned dma_streams() const { return dma_streams_; }
  slice_layout hbm_slices() const { return {o_.shape.layer_bytes, uint64_t{o_.shape.hbm_slots} * o_.shape.layer_bytes, 0}; }
  slice_layout dram_slices() const { return {o_.shape.block_bytes(), o_.shape.layer_bytes, 0}; }

private:
  double time_request(tier from, tier to, std::vector<slot_pair> moves, copy_path path, uint32_t layer_count = 0) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) { // first run warms up; keep the best of the rest
      std::promise<void> landed;
      auto start = clock_type::now();
      move_request r{from, to, moves, 0, layer_count, 0, path};
      submit(std::move(r), [&](const move_result&) { landed.set_value(); });
      landed.get_future().wait();
      double s = std::chrono::duration<double>(clock_type::now() - start).count();
      if (rep > 0)
        best = std::min(best, s);
    }
    return best;
  }

  // Measures every path in both directions over the pools' first slots:
  // the same bytes once as scattered blocks (one run each) and once as one
  // run, then fits per-run cost and bandwidth (copy_plan.hpp). Also finds
  // the fewest CTAs with which the mapped-memory kernel fills the link, and
  // the DMA share of a split chunk that moves scattered blocks fastest.
  void calibrate() {
    uint64_t bb = o_.shape.block_bytes();
    uint32_t slots = std::min(o_.shape.hbm_slots, o_.shape.dram_slots);
    uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(slots, (256ull << 20) / bb));
    if (n < 16)
      return; // pools too small to say anything; keep the profile's figures
    // Scattered: DRAM slots in a fixed random order. (Descending slots are
    // not scattered to a DMA engine: it ran them at the contiguous rate.)
    std::vector<uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), std::mt19937{20261129});
    std::vector<slot_pair> scattered, contiguous;
    for (uint32_t i = 0; i < n; ++i) {
      scattered.push_back({order[i], i});
      contiguous.push_back({i, i});
    }
    auto flip = [](std::vector<slot_pair> v) {
      for (auto& p : v)
        std::swap(p.from_slot, p.to_slot);
      return v;
    };
    uint64_t bytes = uint64_t{n} * bb;
    unsigned best_ctas = sm_ctas_;
    double best_s = 1e30;
    std::vector<std::pair<unsigned, double>> sweep;
    for (unsigned ctas : {2u, 4u, 8u, 12u, 16u, 24u, 32u}) {
      sm_ctas_ = ctas;
      double s = time_request(tier::dram, tier::hbm, contiguous, copy_path::sm_copy);
      sweep.push_back({ctas, s});
      best_s = std::min(best_s, s);
    }
    for (auto [ctas, s] : sweep)
      if (s <= best_s / 0.97) { // fewest CTAs within 3% of the best
        best_ctas = ctas;
        break;
      }
    sm_ctas_ = best_ctas;
    // Streams for the DMA paths: the fewest within 3% of the fastest on
    // scattered blocks (both directions at once would share them).
    if (o_.dma_streams == 0) {
      std::vector<std::pair<unsigned, double>> by_streams;
      double fastest = 1e30;
      for (unsigned k : {1u, 2u, 4u, 8u}) {
        dma_streams_ = k;
        double s = time_request(tier::dram, tier::hbm, scattered, copy_path::dma_batch) +
                   time_request(tier::hbm, tier::dram, flip(scattered), copy_path::dma_batch);
        by_streams.push_back({k, s});
        fastest = std::min(fastest, s);
      }
      for (auto [k, s] : by_streams)
        if (s <= fastest / 0.97) {
          dma_streams_ = k;
          break;
        }
    }
    for (bool h2d : {true, false}) {
      auto& dir = h2d ? costs_.h2d : costs_.d2h;
      tier from = h2d ? tier::dram : tier::hbm;
      tier to = h2d ? tier::hbm : tier::dram;
      for (auto path : {copy_path::dma_runs, copy_path::dma_batch, copy_path::host_staged, copy_path::sm_copy}) {
        double a = time_request(from, to, h2d ? scattered : flip(scattered), path);
        double b = time_request(from, to, h2d ? contiguous : flip(contiguous), path);
        dir.of(path) = fit_cost(n, a, 1, b, bytes);
      }
      // One strided DMA per block whatever the runs: separate per-block cost
      // from bandwidth by moving all layers, then half of them.
      uint32_t half = std::max(1u, o_.shape.layers / 2);
      double all = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::dma_2d);
      double part = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::dma_2d, half);
      dir.dma_2d = half < o_.shape.layers
                     ? fit_cost_by_bytes(n, all, bytes, part, bytes / o_.shape.layers * half)
                     : path_cost{all / n * 1e6, 1e6};
      // Split: the DMA share that moves scattered blocks fastest, then its
      // cost like the other paths'.
      double fastest = 1e30;
      double best_share = dir.split_dma_share;
      for (double share : {0.2, 0.3, 0.4, 0.5, 0.6, 0.7}) {
        dir.split_dma_share = share;
        double s = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::split);
        if (s < fastest)
          fastest = s, best_share = share;
      }
      dir.split_dma_share = best_share;
      dir.split = fit_cost(n, fastest, 1, time_request(from, to, h2d ? contiguous : flip(contiguous), copy_path::split), bytes);
    }
    costs_.measured = true;
    costs_.dma_streams = dma_streams_;
    costs_.sm_copy_ctas = sm_ctas_;
  }

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

// -- lane ---------------------------------------------------------------------

lane::lane(cuda_mover& owner, bool to_hbm, uint32_t helper_threads)
  : m_(owner), to_hbm_(to_hbm), pool_(helper_threads) {
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
  issue_thread_ = std::thread([this] { issue_loop(); });
  completion_thread_ = std::thread([this] { completion_loop(); });
}

lane::~lane() {
  drain();
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  reaped_.notify_all();
  issue_thread_.join();
  completion_thread_.join();
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
  cudaStreamDestroy(copy_stream_);
  cudaStreamDestroy(convert_stream_);
  cudaStreamDestroy(mapped_stream_);
}

double lane::split_share() const {
  const auto& c = m_.costs();
  return to_hbm_ ? c.h2d.split_dma_share : c.d2h.split_dma_share;
}

void lane::push(std::unique_ptr<job> j) {
  {
    std::lock_guard lock{mutex_};
    queue_.push_back(std::move(j));
    ++outstanding_;
  }
  wake_.notify_one();
}

void lane::drain() {
  std::unique_lock lock{mutex_};
  idle_.wait(lock, [&] { return outstanding_ == 0; });
}

void lane::issue_loop() {
  must(cudaSetDevice(m_.options().device), "cudaSetDevice");
  for (;;) {
    std::unique_ptr<job> j;
    {
      std::unique_lock lock{mutex_};
      if (queue_.empty() && deferred_) {
        lock.unlock();
        flush_deferred(); // nothing new: finish the last chunk's host work now
        continue;
      }
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty())
        return;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    run(std::move(j));
  }
}

void lane::run(std::unique_ptr<job> j) {
  const auto& shape = m_.options().shape;
  auto& r = j->request;
  auto range = layers_of(r, shape);
  uint64_t sel = uint64_t{range.count} * shape.layer_bytes;
  copy_path path = r.path == copy_path::automatic ? m_.choose(r) : r.path;
  if (path == copy_path::host_memcpy)
    path = copy_path::host_staged;
  j->path = path;
  j->start = clock_type::now();
  j->bytes = r.moves.size() * sel;
  const uint32_t desc_chunk = std::max(m_.desc_capacity() / range.count, 1u);
  uint32_t per_chunk = std::max(std::min(blocks_per_chunk(m_.stage_bytes(), sel), desc_chunk), 1u);
  if (path == copy_path::sm_copy) // no staging: one launch per descriptor buffer
    per_chunk = desc_chunk;
  // A split chunk: staging holds its DMA share, the kernel takes the rest.
  const auto split_chunk = static_cast<uint32_t>(
    std::clamp<double>(per_chunk / std::max(split_share(), 0.05), per_chunk, desc_chunk));
  std::span<const slot_pair> all{r.moves};
  bool staged_d2h = !to_hbm_ && path == copy_path::host_staged;
  if (all.empty()) {
    complete(nullptr, std::move(j));
    return;
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
      if (last)
        deferred_->finishing = std::move(j);
    } else if (last) {
      bool copy_only = path == copy_path::sm_copy || path == copy_path::dma_2d || !to_hbm_;
      complete(copy_only ? copy_stream_ : convert_stream_, std::move(j));
    }
  }
}

template <class Issue>
bool lane::spread(job& j, size_t count, Issue&& issue) {
  unsigned k = static_cast<unsigned>(std::min<size_t>(m_.dma_streams(), std::max<size_t>(count, 1)));
  if (k <= 1)
    return issue(copy_stream_, size_t{0}, count);
  cudaError_t e;
  if ((e = cudaEventRecord(fork_, copy_stream_)))
    return fail(j, "event record", e), false;
  for (unsigned s = 0; s < k; ++s) {
    cudaStream_t stream = s == 0 ? copy_stream_ : extra_[s - 1];
    if (s > 0 && (e = cudaStreamWaitEvent(stream, fork_)))
      return fail(j, "stream wait", e), false;
    if (!issue(stream, count * s / k, count * (s + 1) / k))
      return false;
  }
  for (unsigned s = 1; s < k; ++s)
    if ((e = cudaEventRecord(join_[s - 1], extra_[s - 1])) || (e = cudaStreamWaitEvent(copy_stream_, join_[s - 1])))
      return fail(j, "stream join", e), false;
  return true;
}

void lane::issue_chunk(job& j, std::span<const slot_pair> moves, int h, double dma_share) {
  // The GPU finished with this half two chunks ago (host waits: it rewrites
  // the half's descriptors and pinned staging next).
  if (cudaError_t e = cudaEventSynchronize(half_[h].free); e != cudaSuccess)
    return fail(j, "staging wait", e);
  switch (j.path) {
    case copy_path::dma_2d:
      return issue_strided(j, moves, h);
    case copy_path::sm_copy: {
      issue_mapped(j, moves, h, 0, copy_stream_);
      if (cudaError_t e = cudaEventRecord(half_[h].free, copy_stream_))
        fail(j, "event record", e);
      return;
    }
    case copy_path::split: {
      // The DMA share first in the chunk (adjacent DRAM slots there still
      // merge into runs), the kernel's share after it, both in flight at once.
      const auto& shape = m_.options().shape;
      uint64_t staged_bytes = uint64_t{layers_of(j.request, shape).count} * shape.layer_bytes;
      auto by_dma = static_cast<size_t>(std::lround(static_cast<double>(moves.size()) * dma_share));
      by_dma = std::min<size_t>({by_dma, moves.size(), blocks_per_chunk(m_.stage_bytes(), staged_bytes)});
      cudaEvent_t also = nullptr;
      if (by_dma < moves.size()) {
        issue_mapped(j, moves.subspan(by_dma), h, static_cast<uint32_t>(by_dma), mapped_stream_);
        if (cudaError_t e = cudaEventRecord(half_[h].mapped, mapped_stream_))
          return fail(j, "event record", e);
        also = half_[h].mapped;
      }
      return issue_staged(j, moves.first(by_dma), h, copy_path::dma_batch, also);
    }
    default:
      return issue_staged(j, moves, h, j.path, nullptr);
  }
}

void lane::issue_strided(job& j, std::span<const slot_pair> moves, int h) {
  // Block-major DRAM block <-> its layer slices in the layer-major pool, one strided copy each.
  const auto& shape = m_.options().shape;
  auto range = layers_of(j.request, shape);
  const uint64_t lb = shape.layer_bytes;
  const uint64_t dram_first = uint64_t{range.first} * lb;
  const uint64_t hbm_pitch = uint64_t{shape.hbm_slots} * lb;
  const auto n = static_cast<uint32_t>(moves.size());
  cudaError_t e;
  bool issued = spread(j, n, [&](cudaStream_t stream, size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      uint32_t hslot = to_hbm_ ? moves[i].to_slot : moves[i].from_slot;
      uint32_t dslot = to_hbm_ ? moves[i].from_slot : moves[i].to_slot;
      std::byte* hbm = m_.hbm() + uint64_t{range.first} * hbm_pitch + uint64_t{hslot} * lb;
      std::byte* dram = m_.dram() + uint64_t{dslot} * shape.block_bytes() + dram_first;
      e = to_hbm_ ? cudaMemcpy2DAsync(hbm, hbm_pitch, dram, lb, lb, range.count, cudaMemcpyHostToDevice, stream)
                  : cudaMemcpy2DAsync(dram, lb, hbm, hbm_pitch, lb, range.count, cudaMemcpyDeviceToHost, stream);
      if (e)
        return fail(j, "cudaMemcpy2DAsync", e), false;
    }
    return true;
  });
  if (!issued)
    return;
  j.operations += n;
  if ((e = cudaEventRecord(half_[h].free, copy_stream_)))
    fail(j, "event record", e);
}

void lane::issue_mapped(job& j, std::span<const slot_pair> moves, int h, uint32_t first_desc, cudaStream_t stream) {
  const auto& shape = m_.options().shape;
  auto range = layers_of(j.request, shape);
  auto& hb = half_[h];
  const auto n = static_cast<uint32_t>(moves.size());
  for (uint32_t i = 0; i < n; ++i)
    hb.host_desc[first_desc + i] = {moves[i].from_slot, moves[i].to_slot};
  cudaError_t e;
  if ((e = cudaMemcpyAsync(hb.dev_desc + first_desc, hb.host_desc + first_desc, size_t{n} * sizeof(slice_pair),
                           cudaMemcpyHostToDevice, stream)))
    return fail(j, "descriptor upload", e);
  cuda::copy_slices_args k;
  k.pair_count = n;
  k.first_layer = range.first;
  k.layer_count = range.count;
  k.layer_bytes = shape.layer_bytes;
  k.pairs = hb.dev_desc + first_desc;
  if (to_hbm_) {
    k.src = m_.dram_device(), k.src_layout = m_.dram_slices();
    k.dst = m_.hbm(), k.dst_layout = m_.hbm_slices();
  } else {
    k.src = m_.hbm(), k.src_layout = m_.hbm_slices();
    k.dst = m_.dram_device(), k.dst_layout = m_.dram_slices();
  }
  e = m_.options().bulk_copy ? cuda::launch_bulk_copy_slices(k, m_.sm_ctas(), stream)
                              : cuda::launch_copy_slices(k, m_.sm_ctas(), stream);
  if (e)
    return fail(j, "copy kernel over mapped memory", e);
  j.operations += 2;
}

void lane::issue_staged(job& j, std::span<const slot_pair> moves, int h, copy_path how, cudaEvent_t also) {
  const auto& shape = m_.options().shape;
  const auto& r = j.request;
  auto range = layers_of(r, shape);
  const uint64_t lb = shape.layer_bytes;
  const uint64_t sel = uint64_t{range.count} * lb;
  const bool whole = range.count == shape.layers;
  auto& hb = half_[h];
  const uint32_t n = static_cast<uint32_t>(moves.size());
  const size_t desc_bytes = size_t{n} * sizeof(slice_pair);
  cudaError_t e;
  // The stream that finishes the chunk: it marks the half free.
  cudaStream_t last = to_hbm_ ? convert_stream_ : copy_stream_;
  auto mark_free = [&] {
    if (also != nullptr && (e = cudaStreamWaitEvent(last, also)))
      return fail(j, "stream wait", e);
    if ((e = cudaEventRecord(hb.free, last)))
      fail(j, "event record", e);
  };
  if (n == 0)
    return mark_free();

  cuda::copy_slices_args k;
  k.pair_count = n;
  k.first_layer = range.first;
  k.layer_count = range.count;
  k.layer_bytes = lb;
  k.pairs = hb.dev_desc;
  const slice_layout stage{sel, lb, range.first};
  const uint64_t dram_first = uint64_t{range.first} * lb; // offset of the range in a DRAM block

  // Descriptors map staging position i <-> the HBM slot.
  for (uint32_t i = 0; i < n; ++i)
    hb.host_desc[i] = to_hbm_ ? slice_pair{i, moves[i].to_slot} : slice_pair{moves[i].from_slot, i};

  auto runs = how == copy_path::host_staged ? std::vector<dram_run>{} : dram_runs(moves, to_hbm_, whole);
  auto dram_at = [&](uint32_t i) {
    uint32_t slot = to_hbm_ ? moves[i].from_slot : moves[i].to_slot;
    return m_.dram() + uint64_t{slot} * shape.block_bytes() + dram_first;
  };

  // Moves the chunk's bytes between DRAM and dev_stage on copy_stream_.
  auto link = [&]() -> bool {
    if (how == copy_path::host_staged) {
      auto kind = to_hbm_ ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
      void* dst = to_hbm_ ? static_cast<void*>(hb.dev_stage) : hb.host_stage;
      const void* src = to_hbm_ ? static_cast<const void*>(hb.host_stage) : hb.dev_stage;
      if ((e = cudaMemcpyAsync(dst, src, n * sel, kind, copy_stream_)))
        return fail(j, "staged DMA", e), false;
      j.operations += 1;
      return true;
    }
    if (how == copy_path::dma_batch) {
      std::vector<void*> dsts(runs.size());
      std::vector<const void*> srcs(runs.size());
      std::vector<size_t> sizes(runs.size());
      for (size_t i = 0; i < runs.size(); ++i) {
        std::byte* host = dram_at(runs[i].first);
        std::byte* dev = hb.dev_stage + uint64_t{runs[i].first} * sel;
        dsts[i] = to_hbm_ ? static_cast<void*>(dev) : host;
        srcs[i] = to_hbm_ ? static_cast<const void*>(host) : dev;
        sizes[i] = runs[i].count * sel;
      }
      cudaMemcpyAttributes attr{};
      attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      attr.srcLocHint.type = to_hbm_ ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
      attr.srcLocHint.id = to_hbm_ ? 0 : m_.options().device;
      attr.dstLocHint.type = to_hbm_ ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
      attr.dstLocHint.id = to_hbm_ ? m_.options().device : 0;
      attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
      size_t attr_index = 0;
      return spread(j, runs.size(), [&](cudaStream_t stream, size_t begin, size_t end) {
        if ((e = cudaMemcpyBatchAsync(dsts.data() + begin, srcs.data() + begin, sizes.data() + begin, end - begin, &attr,
                                      &attr_index, 1, stream)))
          return fail(j, "cudaMemcpyBatchAsync", e), false;
        j.operations += 1;
        return true;
      });
    }
    j.operations += runs.size();
    return spread(j, runs.size(), [&](cudaStream_t stream, size_t begin, size_t end) { // dma_runs
      for (size_t ri = begin; ri < end; ++ri) {
        std::byte* host = dram_at(runs[ri].first);
        std::byte* dev = hb.dev_stage + uint64_t{runs[ri].first} * sel;
        e = to_hbm_ ? cudaMemcpyAsync(dev, host, runs[ri].count * sel, cudaMemcpyHostToDevice, stream)
                    : cudaMemcpyAsync(host, dev, runs[ri].count * sel, cudaMemcpyDeviceToHost, stream);
        if (e)
          return fail(j, "cudaMemcpyAsync", e), false;
      }
      return true;
    });
  };

  if (to_hbm_) {
    if (how == copy_path::host_staged) // pack on the CPU while the previous chunk crosses the link
      pool_.parallel_for(n, [&](size_t i) { std::memcpy(hb.host_stage + i * sel, dram_at(static_cast<uint32_t>(i)), sel); });
    if (!link())
      return;
    if ((e = cudaMemcpyAsync(hb.dev_desc, hb.host_desc, desc_bytes, cudaMemcpyHostToDevice, copy_stream_)))
      return fail(j, "descriptor upload", e);
    if ((e = cudaEventRecord(hb.copied, copy_stream_)) || (e = cudaStreamWaitEvent(convert_stream_, hb.copied)))
      return fail(j, "event", e);
    k.src = hb.dev_stage, k.src_layout = stage;
    k.dst = m_.hbm(), k.dst_layout = m_.hbm_slices();
    if ((e = cuda::launch_copy_slices(k, m_.options().convert_ctas, convert_stream_)))
      return fail(j, "scatter kernel", e);
    j.operations += 1;
    mark_free();
  } else {
    if ((e = cudaMemcpyAsync(hb.dev_desc, hb.host_desc, desc_bytes, cudaMemcpyHostToDevice, convert_stream_)))
      return fail(j, "descriptor upload", e);
    k.src = m_.hbm(), k.src_layout = m_.hbm_slices();
    k.dst = hb.dev_stage, k.dst_layout = stage;
    if ((e = cuda::launch_copy_slices(k, m_.options().convert_ctas, convert_stream_)))
      return fail(j, "gather kernel", e);
    j.operations += 1;
    if ((e = cudaEventRecord(hb.copied, convert_stream_)) || (e = cudaStreamWaitEvent(copy_stream_, hb.copied)))
      return fail(j, "event", e);
    if (!link())
      return;
    mark_free();
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
      std::byte* dst = m_.dram() + uint64_t{d.moves[i].to_slot} * shape.block_bytes() + uint64_t{range.first} * shape.layer_bytes;
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
  if (last != nullptr && c.work->error.empty()) {
    cudaError_t e = cudaEventCreateWithFlags(&c.event, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaEventRecord(c.event, last);
    if (e != cudaSuccess) {
      fail(*c.work, "completion event", e);
      if (c.event)
        cudaEventDestroy(c.event);
      c.event = nullptr;
    }
  }
  {
    std::lock_guard lock{mutex_};
    completions_.push_back(std::move(c));
  }
  reaped_.notify_one();
}

void lane::completion_loop() {
  must(cudaSetDevice(m_.options().device), "cudaSetDevice");
  for (;;) {
    completion c;
    {
      std::unique_lock lock{mutex_};
      reaped_.wait(lock, [&] { return stopping_ || !completions_.empty(); });
      if (completions_.empty())
        return;
      c = std::move(completions_.front());
      completions_.pop_front();
    }
    auto& j = *c.work;
    if (c.event) {
      // Polled, not a blocking sync: waking from one took long enough to cost
      // a few percent of a 128 MiB request's link time.
      cudaError_t e;
      while ((e = cudaEventQuery(c.event)) == cudaErrorNotReady)
        std::this_thread::yield();
      if (e != cudaSuccess)
        fail(j, "transfer", e);
      cudaEventDestroy(c.event);
    }
    double seconds = std::chrono::duration<double>(clock_type::now() - j.start).count();
    {
      std::lock_guard lock{mutex_};
      counters_.bytes += j.error.empty() ? j.bytes : 0;
      counters_.operations += j.operations;
      counters_.requests += 1;
      counters_.busy_seconds += seconds;
    }
    if (j.done) {
      move_result res{j.request.tag, j.error.empty() ? j.bytes : 0, j.path, j.error.empty(), j.error};
      j.done(res);
    }
    c.work.reset();
    std::lock_guard lock{mutex_};
    if (--outstanding_ == 0)
      idle_.notify_all();
  }
}

} // namespace

gpu_probe probe_gpu(int device) {
  gpu_probe p;
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError(); // clear it: the process goes on without a GPU
    p.reason = "no usable GPU: " + cuda_text("cudaGetDeviceCount", e);
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
    p.reason = "no usable GPU: " + cuda_text("device init", e);
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
  return std::make_unique<cuda_mover>(options, p.device_name);
}

} // namespace kvtier::copy
