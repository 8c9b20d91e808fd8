#include "kernels/copy/cuda_baselines.hpp"

#include "kernels/copy/cuda/copy_kernels.hpp"
#include "kernels/copy/cuda_mover.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvtier::copy::baseline {

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kvtier: CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    std::exit(3);
  }
}

namespace {

// Two streams and events: `work(up, down)` enqueues on them; returns seconds
// from the first to the last byte, both streams joined.
template <class Work>
double timed(Work&& work, int reps) {
  cudaStream_t up, down;
  must(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "stream");
  must(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), "stream");
  cudaEvent_t start, mid, stop;
  must(cudaEventCreate(&start), "event");
  must(cudaEventCreate(&mid), "event");
  must(cudaEventCreate(&stop), "event");
  std::vector<double> times;
  for (int rep = 0; rep <= reps; ++rep) { // rep 0 warms up
    must(cudaEventRecord(start, up), "record");
    must(cudaStreamWaitEvent(down, start), "wait");
    work(up, down);
    must(cudaEventRecord(mid, down), "record");
    must(cudaStreamWaitEvent(up, mid), "wait");
    must(cudaEventRecord(stop, up), "record");
    must(cudaEventSynchronize(stop), "sync");
    float ms = 0;
    must(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    if (rep > 0)
      times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(mid);
  cudaEventDestroy(stop);
  cudaStreamDestroy(up);
  cudaStreamDestroy(down);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The same on the host's clock: from the first enqueue until both streams
// have been seen idle, as a caller waiting on the copy experiences it.
template <class Work>
double timed_wall(Work&& work, int reps) {
  cudaStream_t up, down;
  must(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "stream");
  must(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), "stream");
  std::vector<double> times;
  for (int rep = 0; rep <= reps; ++rep) {
    auto start = std::chrono::steady_clock::now();
    work(up, down);
    must(cudaStreamSynchronize(up), "sync");
    must(cudaStreamSynchronize(down), "sync");
    if (rep > 0)
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  cudaStreamDestroy(up);
  cudaStreamDestroy(down);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

uint64_t bytes_of(const block_list& l) {
  return l.block_bytes * l.host_slots.size();
}

uint64_t moved(const block_list& up, const block_list& down, direction d) {
  return d == direction::h2d ? bytes_of(up) : d == direction::d2h ? bytes_of(down) : bytes_of(up) + bytes_of(down);
}

void batch(void* dev, std::byte* host, const block_list& l, bool h2d, cudaStream_t s, bool driver_picks = false) {
  size_t n = l.host_slots.size();
  std::vector<void*> dsts(n);
  std::vector<const void*> srcs(n);
  std::vector<size_t> sizes(n, l.block_bytes);
  for (size_t i = 0; i < n; ++i) {
    void* h = host + uint64_t{l.host_slots[i]} * l.block_bytes;
    void* g = static_cast<std::byte*>(dev) + uint64_t{l.dev_slots[i]} * l.block_bytes;
    dsts[i] = h2d ? g : h;
    srcs[i] = h2d ? h : g;
  }
  cudaMemcpyAttributes attr{};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  attr.srcLocHint.type = h2d ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
  attr.dstLocHint.type = h2d ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
  attr.flags = cudaMemcpyFlagPreferOverlapWithCompute;
  if (driver_picks) { // no hint: the driver may copy with SMs; any source order
    attr.flags = cudaMemcpyFlagDefault;
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderAny;
  }
  size_t idx = 0;
  must(cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), n, &attr, &idx, 1, s), "cudaMemcpyBatchAsync");
}

} // namespace

double contiguous_gbps(void* dev, std::byte* host, uint64_t bytes, direction d, int reps, bool wall_clock) {
  // `both`: H2D into the first half of `dev`'s range, D2H from the second, so
  // neither reads what the other writes.
  auto* g = static_cast<std::byte*>(dev);
  auto work = [&](cudaStream_t up, cudaStream_t down) {
    if (d != direction::d2h)
      must(cudaMemcpyAsync(g, host, bytes, cudaMemcpyHostToDevice, up), "memcpy");
    if (d != direction::h2d)
      must(cudaMemcpyAsync(host + (d == direction::both ? bytes : 0), g + (d == direction::both ? bytes : 0), bytes,
                           cudaMemcpyDeviceToHost, down),
           "memcpy");
  };
  double s = wall_clock ? timed_wall(work, reps) : timed(work, reps);
  return (d == direction::both ? 2.0 : 1.0) * bytes / s / 1e9;
}

double per_block_gbps(void* dev, std::byte* host, const block_list& up, const block_list& down, direction d, int reps) {
  auto* g = static_cast<std::byte*>(dev);
  double s = timed(
      [&](cudaStream_t su, cudaStream_t sd) {
        size_t n = std::max(up.host_slots.size(), down.host_slots.size());
        for (size_t i = 0; i < n; ++i) { // interleaved, as two issuing threads would
          if (d != direction::d2h && i < up.host_slots.size())
            must(cudaMemcpyAsync(g + uint64_t{up.dev_slots[i]} * up.block_bytes,
                                 host + uint64_t{up.host_slots[i]} * up.block_bytes, up.block_bytes,
                                 cudaMemcpyHostToDevice, su),
                 "memcpy");
          if (d != direction::h2d && i < down.host_slots.size())
            must(cudaMemcpyAsync(host + uint64_t{down.host_slots[i]} * down.block_bytes,
                                 g + uint64_t{down.dev_slots[i]} * down.block_bytes, down.block_bytes,
                                 cudaMemcpyDeviceToHost, sd),
                 "memcpy");
        }
      },
      reps);
  return moved(up, down, d) / s / 1e9;
}

double batched_gbps(void* dev, std::byte* host, const block_list& up, const block_list& down, direction d, int reps,
                    bool driver_picks) {
  double s = timed(
      [&](cudaStream_t su, cudaStream_t sd) {
        if (d != direction::d2h)
          batch(dev, host, up, true, su, driver_picks);
        if (d != direction::h2d)
          batch(dev, host, down, false, sd, driver_picks);
      },
      reps);
  return moved(up, down, d) / s / 1e9;
}

double sm_copy_gbps(void* dev, std::byte* host, const block_list& l, direction d, unsigned ctas, int reps) {
  size_t n = l.host_slots.size();
  std::vector<cuda::slice_pair> pairs(n);
  for (size_t i = 0; i < n; ++i)
    pairs[i] = d == direction::h2d ? cuda::slice_pair{l.host_slots[i], l.dev_slots[i]}
                                   : cuda::slice_pair{l.dev_slots[i], l.host_slots[i]};
  cuda::slice_pair* dpairs = nullptr;
  must(cudaMalloc(&dpairs, n * sizeof(cuda::slice_pair)), "malloc");
  must(cudaMemcpy(dpairs, pairs.data(), n * sizeof(cuda::slice_pair), cudaMemcpyHostToDevice), "memcpy");
  void* mapped = nullptr;
  must(cudaHostGetDevicePointer(&mapped, host, 0), "mapped pointer");
  cuda::copy_slices_args a;
  a.pairs = dpairs;
  a.pair_count = static_cast<uint32_t>(n);
  a.layer_count = 1;
  a.layer_bytes = l.block_bytes;
  a.src_layout = a.dst_layout = {l.block_bytes, l.block_bytes, 0};
  a.src = d == direction::h2d ? mapped : dev;
  a.dst = d == direction::h2d ? dev : mapped;
  double s =
      timed([&](cudaStream_t up, cudaStream_t) { must(cuda::launch_copy_slices(a, ctas, up), "copy kernel"); }, reps);
  cudaFree(dpairs);
  return bytes_of(l) / s / 1e9;
}

double hbm_copy_gbps(void* dev, uint64_t bytes, unsigned ctas, int reps) {
  // Scatter 1 KiB slices of the first half into the second half, reversed.
  const uint64_t slice = 1024;
  uint32_t n = static_cast<uint32_t>(bytes / 2 / slice);
  std::vector<cuda::slice_pair> pairs(n);
  for (uint32_t i = 0; i < n; ++i)
    pairs[i] = {i, n - 1 - i};
  cuda::slice_pair* dpairs = nullptr;
  must(cudaMalloc(&dpairs, n * sizeof(cuda::slice_pair)), "malloc");
  must(cudaMemcpy(dpairs, pairs.data(), n * sizeof(cuda::slice_pair), cudaMemcpyHostToDevice), "memcpy");
  cuda::copy_slices_args a;
  a.pairs = dpairs;
  a.pair_count = n;
  a.layer_count = 1;
  a.layer_bytes = slice;
  a.src_layout = a.dst_layout = {slice, slice, 0};
  a.src = dev;
  a.dst = static_cast<std::byte*>(dev) + uint64_t{n} * slice;
  double s =
      timed([&](cudaStream_t up, cudaStream_t) { must(cuda::launch_copy_slices(a, ctas, up), "copy kernel"); }, reps);
  cudaFree(dpairs);
  return double(n) * slice / s / 1e9;
}

struct compute_probe::impl {
  explicit impl(int n) : load(n) {}
  cuda::compute_load load;
};

compute_probe::compute_probe(int n) : impl_(std::make_unique<impl>(n)) {
}
compute_probe::~compute_probe() = default;

double compute_probe::run_ms(int iterations, int reps) {
  std::vector<double> t;
  impl_->load.run_ms(1); // warm
  for (int i = 0; i < reps; ++i)
    t.push_back(impl_->load.run_ms(iterations));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double compute_probe::tflops(double ms, int iterations) const {
  return impl_->load.flops_per_iteration() * iterations / (ms * 1e-3) / 1e12;
}

const char* compute_probe::what() const {
  return impl_->load.what();
}

std::string describe_device(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess)
    return "unknown device";
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  char text[1024];
  std::snprintf(text, sizeof text, "%s, %d SMs, %.0f GiB HBM, PCI %02x:%02x, driver %d, runtime %d", p.name,
                p.multiProcessorCount, p.totalGlobalMem / 1073741824.0, p.pciBusID, p.pciDeviceID, driver, runtime);
  return text;
}

} // namespace kvtier::copy::baseline

namespace kvtier::copy {

std::optional<link_figures> measure_link(int device, std::string* why) {
  auto gpu = probe_gpu(device);
  if (!gpu.usable) {
    if (why)
      *why = gpu.reason;
    return std::nullopt;
  }
  // 512 MiB each way: ~10 ms on Gen5 x16, far past any per-copy cost.
  const uint64_t bytes = 512ull << 20;
  void* dev = nullptr;
  void* host = nullptr;
  baseline::must(cudaMalloc(&dev, 2 * bytes), "cudaMalloc");
  baseline::must(cudaHostAlloc(&host, 2 * bytes, cudaHostAllocPortable), "cudaHostAlloc");
  auto* h = static_cast<std::byte*>(host);
  link_figures f;
  f.h2d_gbps = baseline::contiguous_gbps(dev, h, bytes, baseline::direction::h2d, 5);
  f.d2h_gbps = baseline::contiguous_gbps(dev, h, bytes, baseline::direction::d2h, 5);
  f.duplex_gbps = baseline::contiguous_gbps(dev, h, bytes, baseline::direction::both, 5);
  f.h2d_latency_us = 4096 / baseline::contiguous_gbps(dev, h, 4096, baseline::direction::h2d, 21) / 1e3;
  f.d2h_latency_us = 4096 / baseline::contiguous_gbps(dev, h, 4096, baseline::direction::d2h, 21) / 1e3;
  cudaFree(dev);
  cudaFreeHost(host);
  return f;
}

} // namespace kvtier::copy
