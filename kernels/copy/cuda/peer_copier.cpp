// The CUDA peer copier (peer_copy.hpp's make_cuda_peer_copier): peer access
// enabled both ways, one stream on the device that does the work (the
// source GPU when pushing, the destination when pulling), the request's
// coalesced runs moved by one kernel or by one cudaMemcpyPeerAsync each.
// copy() is synchronous: it returns when the stream has drained.

#include "kernels/copy/cuda/cuda_support.hpp"
#include "kernels/copy/cuda/peer_kernels.hpp"
#include "kernels/copy/peer_copy.hpp"
#include "kernels/copy/peer_plan.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace kvtier::copy {

namespace {

/// Pieces of 64 KiB: one Llama-3-8B slice (K and V of 16 tokens) each, and
/// long runs spread over as many CTAs.
constexpr uint64_t piece_bytes = 64 << 10;

/// The calling thread's current device, restored on leaving the scope.
class device_scope {
public:
  explicit device_scope(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess)
      previous_ = -1;
    status = cudaSetDevice(device);
  }
  ~device_scope() {
    if (previous_ >= 0)
      cudaSetDevice(previous_);
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  cudaError_t status;

private:
  int previous_ = -1;
};

/// Enables `device`'s access to `peer`'s memory; already enabled is fine. A
/// failure is cleared from the runtime's last error (a later launch check
/// must not see it).
std::string enable_peer_access(int device, int peer) {
  int can = 0;
  cudaError_t e = cudaDeviceCanAccessPeer(&can, device, peer);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return gpu::cuda_text("cudaDeviceCanAccessPeer", e);
  }
  if (!can)
    return "GPU " + std::to_string(device) + " cannot access GPU " + std::to_string(peer) +
        "'s memory (no NVLink or PCIe peer-to-peer between them)";
  device_scope on(device);
  if (on.status != cudaSuccess)
    return gpu::cuda_text("cudaSetDevice", on.status);
  e = cudaDeviceEnablePeerAccess(peer, 0);
  if (e == cudaSuccess)
    return {};
  cudaGetLastError();
  return e == cudaErrorPeerAccessAlreadyEnabled ? std::string() : gpu::cuda_text("cudaDeviceEnablePeerAccess", e);
}

class cuda_peer_copier final : public peer_copier {
public:
  cuda_peer_copier(const peer_options& o, int engine, unsigned ctas, cudaStream_t stream)
      : o_(o), engine_(engine), ctas_(ctas), stream_(stream) {}

  ~cuda_peer_copier() override {
    device_scope on(engine_);
    cudaStreamSynchronize(stream_);
    cudaFree(device_pieces_);
    cudaFreeHost(host_pieces_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override {
    return "cuda:" + std::to_string(o_.from_device) + "->cuda:" + std::to_string(o_.to_device) + " " +
        to_string(o_.path) + (o_.path == peer_path::kernel ? (o_.pull ? " (pull)" : " (push)") : "");
  }

  peer_result copy(const peer_request& request) override {
    peer_result result;
    auto fail = [&](std::string error) {
      result.ok = false;
      result.error = std::move(error);
      return result;
    };
    const auto planning = gpu::clock_type::now();
    if (auto problem = check_peer_request(request); !problem.empty())
      return fail(problem);
    const auto runs = peer_runs(request);
    for (const auto& run : runs)
      result.bytes += run.bytes;
    result.runs = runs.size();
    if (runs.empty())
      return result;
    device_scope on(engine_);
    if (on.status != cudaSuccess)
      return fail(gpu::cuda_text("cudaSetDevice", on.status));
    std::vector<byte_run> pieces;
    if (o_.path == peer_path::kernel) {
      pieces = split_runs(runs, piece_bytes);
      if (auto error = reserve(pieces.size()); !error.empty())
        return fail(error);
      for (size_t i = 0; i < pieces.size(); ++i)
        host_pieces_[i] = {pieces[i].from_offset, pieces[i].to_offset, pieces[i].bytes};
    }
    const auto start = gpu::clock_type::now();
    result.plan_seconds = std::chrono::duration<double>(start - planning).count();
    if (o_.path == peer_path::kernel) {
      const auto count = static_cast<uint32_t>(pieces.size());
      cudaError_t e = cudaMemcpyAsync(device_pieces_, host_pieces_, sizeof(cuda::peer_piece) * count,
                                      cudaMemcpyHostToDevice, stream_);
      if (e != cudaSuccess)
        return fail(gpu::cuda_text("cudaMemcpyAsync (pieces)", e));
      if ((e = cuda::launch_peer_copy(request.from.base, request.to.base, device_pieces_, count,
                                      std::min<unsigned>(ctas_, std::max<uint32_t>(count, 1)), stream_)) != cudaSuccess)
        return fail(gpu::cuda_text("peer copy kernel launch", e));
      result.operations = 1;
    } else {
      for (const auto& run : runs) {
        cudaError_t e = cudaMemcpyPeerAsync(request.to.base + run.to_offset, o_.to_device,
                                            request.from.base + run.from_offset, o_.from_device, run.bytes, stream_);
        if (e != cudaSuccess) {
          cudaStreamSynchronize(stream_);
          return fail(gpu::cuda_text("cudaMemcpyPeerAsync", e));
        }
        ++result.operations;
      }
    }
    if (cudaError_t e = cudaStreamSynchronize(stream_); e != cudaSuccess)
      return fail(gpu::cuda_text("cudaStreamSynchronize after the peer copy", e));
    result.seconds = std::chrono::duration<double>(gpu::clock_type::now() - start).count();
    return result;
  }

private:
  /// Room for `count` pieces in pinned host memory and on the engine device
  /// (the stream is idle between copies, so the old buffers are free).
  std::string reserve(size_t count) {
    if (count <= capacity_)
      return {};
    cudaFree(device_pieces_);
    cudaFreeHost(host_pieces_);
    device_pieces_ = nullptr;
    host_pieces_ = nullptr;
    capacity_ = 0;
    const size_t bytes = sizeof(cuda::peer_piece) * count;
    void* host = nullptr;
    void* device = nullptr;
    if (cudaError_t e = cudaMallocHost(&host, bytes); e != cudaSuccess)
      return gpu::cuda_text("cudaMallocHost (piece list)", e);
    host_pieces_ = static_cast<cuda::peer_piece*>(host);
    if (cudaError_t e = cudaMalloc(&device, bytes); e != cudaSuccess)
      return gpu::cuda_text("cudaMalloc (piece list)", e);
    device_pieces_ = static_cast<cuda::peer_piece*>(device);
    capacity_ = count;
    return {};
  }

  peer_options o_;
  int engine_;
  unsigned ctas_;
  cudaStream_t stream_;
  cuda::peer_piece* host_pieces_ = nullptr;
  cuda::peer_piece* device_pieces_ = nullptr;
  size_t capacity_ = 0;
};

} // namespace

std::unique_ptr<peer_copier> make_cuda_peer_copier(const peer_options& o, std::string* why) {
  auto refuse = [&](std::string reason) -> std::unique_ptr<peer_copier> {
    if (why)
      *why = std::move(reason);
    return nullptr;
  };
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    cudaGetLastError();
    return refuse("no usable GPU: " + gpu::cuda_text("cudaGetDeviceCount", e));
  }
  const bool one_device = o.from_device == o.to_device;
  if (o.from_device < 0 || o.to_device < 0 || o.from_device >= count || o.to_device >= count)
    return refuse("devices " + std::to_string(o.from_device) + " and " + std::to_string(o.to_device) +
                  " must be devices of the " + std::to_string(count) + " present");
  // The kernel needs its device's access to the other one's memory; DMA goes
  // without (the driver stages it through the host: slower, still correct).
  const int engine = o.pull ? o.to_device : o.from_device;
  for (auto [device, peer] : {std::pair{o.from_device, o.to_device}, std::pair{o.to_device, o.from_device}})
    if (auto error = one_device ? std::string() : enable_peer_access(device, peer);
        !error.empty() && o.path == peer_path::kernel && device == engine)
      return refuse(error);
  device_scope on(engine);
  if (on.status != cudaSuccess)
    return refuse(gpu::cuda_text("cudaSetDevice", on.status));
  int multiprocessors = 0;
  if (cudaError_t e = cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, engine);
      e != cudaSuccess)
    return refuse(gpu::cuda_text("cudaDeviceGetAttribute", e));
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess)
    return refuse(gpu::cuda_text("cudaStreamCreateWithFlags", e));
  const unsigned ctas = o.ctas ? o.ctas : 2u * static_cast<unsigned>(multiprocessors);
  return std::make_unique<cuda_peer_copier>(o, engine, ctas, stream);
}

} // namespace kvtier::copy
