#include "kernels/model/cuda/pinned_staging.hpp"

#include "runtime/check.hpp"

#include <algorithm>
#include <cstring>

namespace kvtier::model::cuda {
namespace {

// Grows a pinned buffer to at least `bytes` (geometrically: a step's sizes
// creep up as contexts grow, and cudaHostAlloc costs milliseconds).
bool grow(std::byte*& buffer, uint64_t& capacity, uint64_t bytes, const char* what, std::string& error) {
  if (bytes <= capacity)
    return true;
  const uint64_t want = std::max<uint64_t>({bytes, capacity * 2, 64 * 1024});
  if (buffer != nullptr)
    cudaFreeHost(buffer);
  buffer = nullptr;
  capacity = 0;
  void* p = nullptr;
  if (cudaError_t e = cudaHostAlloc(&p, want, cudaHostAllocPortable); e != cudaSuccess) {
    error = std::string{"cudaHostAlloc of "} + std::to_string(want) + " pinned bytes for the forward's " + what + ": " +
        cudaGetErrorString(e);
    return false;
  }
  buffer = static_cast<std::byte*>(p);
  capacity = want;
  return true;
}

} // namespace

pinned_staging::~pinned_staging() {
  if (uploaded_ != nullptr) {
    cudaEventSynchronize(uploaded_);
    cudaEventDestroy(uploaded_);
  }
  if (up_ != nullptr)
    cudaFreeHost(up_);
  if (down_ != nullptr)
    cudaFreeHost(down_);
}

bool pinned_staging::begin_uploads(uint64_t bytes, std::string& error) {
  if (uploaded_ == nullptr) {
    if (cudaError_t e = cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming); e != cudaSuccess) {
      uploaded_ = nullptr;
      error = std::string{"cudaEventCreate for the forward's uploads: "} + cudaGetErrorString(e);
      return false;
    }
  } else if (cudaError_t e = cudaEventSynchronize(uploaded_); e != cudaSuccess) {
    error = std::string{"waiting for the last step's uploads: "} + cudaGetErrorString(e);
    return false;
  }
  up_used_ = 0;
  return grow(up_, up_capacity_, bytes, "uploads", error);
}

void pinned_staging::upload_raw(void* device, const void* host, uint64_t bytes, cudaStream_t stream) {
  KVTIER_CHECK(up_used_ + round_up(bytes) <= up_capacity_,
               "pinned_staging: an upload beyond what begin_uploads made room for");
  if (bytes == 0)
    return;
  std::byte* at = up_ + up_used_;
  std::memcpy(at, host, bytes);
  up_used_ += round_up(bytes);
  cudaMemcpyAsync(device, at, bytes, cudaMemcpyHostToDevice, stream);
}

void pinned_staging::end_uploads(cudaStream_t stream) {
  if (uploaded_ != nullptr)
    cudaEventRecord(uploaded_, stream);
}

const std::byte* pinned_staging::download_raw(const void* device, uint64_t bytes, cudaStream_t stream) {
  std::string ignored; // the caller falls back to pageable memory
  if (!grow(down_, down_capacity_, bytes, "downloads", ignored))
    return nullptr;
  if (bytes > 0)
    cudaMemcpyAsync(down_, device, bytes, cudaMemcpyDeviceToHost, stream);
  return down_;
}

} // namespace kvtier::model::cuda
