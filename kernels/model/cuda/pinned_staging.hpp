#pragma once
// Pinned host memory for a forward step's small transfers: the inputs and
// block tables it uploads, the tokens, logits and block mass it reads back.
//
// Why pinned: cudaMemcpyAsync to or from pageable memory is synchronous, and a
// download into pageable memory waits for the step's kernels inside the
// driver. On the H200 the copy engine's threads waited behind that wait: a
// demotion's first CUDA call took 7.7 ms on average beside the forward
// (docs/slot_placement.md). From pinned memory both directions are plain
// stream operations and the step waits in cudaStreamSynchronize, which holds
// no one up.
//
// Invariants: an upload's bytes are not overwritten before the stream has
// read them (begin_uploads waits for the event recorded after the previous
// step's uploads); a download buffer is read only after the caller has
// synchronized the stream, and is reused only by the next download.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::model::cuda {

class pinned_staging {
public:
  pinned_staging() = default;
  pinned_staging(const pinned_staging&) = delete;
  pinned_staging& operator=(const pinned_staging&) = delete;
  ~pinned_staging();

  /// Room for this step's uploads, `bytes` in all as counted by upload_bytes();
  /// waits for the previous step's uploads to have left. false (and `error`
  /// set) where pinned memory could not be had: then upload() must not be called.
  bool begin_uploads(uint64_t bytes, std::string& error);

  template <class T>
  static uint64_t upload_bytes(const std::vector<T>& host) {
    return round_up(host.size() * sizeof(T));
  }

  /// Copies `host` into the pinned arena and queues its copy to `device`.
  template <class T>
  void upload(T* device, const std::vector<T>& host, cudaStream_t stream) {
    upload_raw(device, host.data(), host.size() * sizeof(T), stream);
  }

  /// Marks the end of this step's uploads on `stream`.
  void end_uploads(cudaStream_t stream);

  /// Queues a copy of `count` elements from `device` into pinned memory and
  /// returns where they will be once the caller has synchronized `stream`;
  /// nullptr (nothing queued) where pinned memory could not be had.
  template <class T>
  const T* download(const T* device, uint64_t count, cudaStream_t stream) {
    return reinterpret_cast<const T*>(download_raw(device, count * sizeof(T), stream));
  }

private:
  static uint64_t round_up(uint64_t bytes) { return (bytes + 255) / 256 * 256; }
  void upload_raw(void* device, const void* host, uint64_t bytes, cudaStream_t stream);
  const std::byte* download_raw(const void* device, uint64_t bytes, cudaStream_t stream);

  std::byte* up_ = nullptr;
  uint64_t up_capacity_ = 0;
  uint64_t up_used_ = 0;
  std::byte* down_ = nullptr;
  uint64_t down_capacity_ = 0;
  cudaEvent_t uploaded_ = nullptr; // after the last step's uploads
};

} // namespace kvtier::model::cuda
