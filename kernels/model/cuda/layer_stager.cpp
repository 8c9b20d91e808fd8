#include "kernels/model/cuda/layer_stager.hpp"

#include "kernels/model/paged_kv.hpp"

#include <cuda_runtime.h>

#include <algorithm>

namespace kvtier::model::cuda {

namespace {

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}
cudaEvent_t as_event(void* e) {
  return static_cast<cudaEvent_t>(e);
}

} // namespace

layer_stager::~layer_stager() {
  if (copy_stream_)
    cudaStreamSynchronize(as_stream(copy_stream_));
  for (int i = 0; i < 2; ++i) {
    if (copied_[i])
      cudaEventDestroy(as_event(copied_[i]));
    if (consumed_[i])
      cudaEventDestroy(as_event(consumed_[i]));
    if (buffers_[i])
      cudaFree(buffers_[i]);
  }
  if (copy_stream_)
    cudaStreamDestroy(as_stream(copy_stream_));
}

bool layer_stager::start(void* compute, std::string& error) {
  compute_ = compute;
  cudaStream_t s = nullptr;
  if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess)
    return error = "layer_stager: cudaStreamCreate failed", false;
  copy_stream_ = s;
  for (int i = 0; i < 2; ++i) {
    cudaEvent_t a = nullptr, b = nullptr;
    if (cudaEventCreateWithFlags(&a, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&b, cudaEventDisableTiming) != cudaSuccess)
      return error = "layer_stager: cudaEventCreate failed", false;
    copied_[i] = a;
    consumed_[i] = b;
    // Recorded once so the first waits on them are satisfied.
    cudaEventRecord(b, as_stream(compute_));
  }
  return true;
}

uint32_t layer_stager::plan(std::span<uint32_t> tables, uint32_t staged_from, uint64_t layer_bytes, bool& ok,
                            std::string& error) {
  ok = true;
  slots_.clear();
  for (uint32_t e : tables)
    if (paged_kv_pool::streamed(e))
      slots_.push_back(e & ~paged_kv_pool::dram_bit);
  std::sort(slots_.begin(), slots_.end());
  slots_.erase(std::unique(slots_.begin(), slots_.end()), slots_.end());
  slices_ = static_cast<uint32_t>(slots_.size());
  layer_bytes_ = layer_bytes;
  if (slices_ == 0)
    return 0;
  for (uint32_t& e : tables)
    if (paged_kv_pool::streamed(e)) {
      auto at = std::lower_bound(slots_.begin(), slots_.end(), e & ~paged_kv_pool::dram_bit);
      e = staged_from + static_cast<uint32_t>(at - slots_.begin());
    }
  const uint64_t need = uint64_t{slices_} * layer_bytes;
  if (need > capacity_bytes_) {
    // Both buffers may still be read by the previous step.
    cudaStreamSynchronize(as_stream(compute_));
    cudaStreamSynchronize(as_stream(copy_stream_));
    for (auto*& b : buffers_) {
      cudaFree(b);
      b = nullptr;
      void* p = nullptr;
      if (cudaMalloc(&p, need) != cudaSuccess) {
        capacity_bytes_ = 0;
        ok = false;
        error = "layer_stager: cudaMalloc of " + std::to_string(need) + " bytes of staging failed";
        return 0;
      }
      b = static_cast<std::byte*>(p);
    }
    capacity_bytes_ = need;
  }
  return slices_;
}

void layer_stager::copy_layer(uint32_t layer) {
  auto* buffer = buffers_[layer % 2];
  auto stream = as_stream(copy_stream_);
  // The buffer's last reader was layer - 2's attention.
  cudaStreamWaitEvent(stream, as_event(consumed_[layer % 2]), 0);
  const uint64_t block_bytes = dram_layout_.block_bytes();
  for (uint32_t first = 0; first < slices_;) {
    uint32_t run = 1;
    while (first + run < slices_ && slots_[first + run] == slots_[first] + run)
      ++run;
    cudaMemcpy2DAsync(buffer + uint64_t{first} * layer_bytes_, layer_bytes_,
                      dram_base_ + dram_layout_.offset(slots_[first], layer), block_bytes, layer_bytes_, run,
                      cudaMemcpyHostToDevice, stream);
    first += run;
  }
  cudaEventRecord(as_event(copied_[layer % 2]), stream);
}

void layer_stager::prime(const std::byte* dram_base, const tier_layout& dram_layout) {
  dram_base_ = dram_base;
  dram_layout_ = dram_layout;
  copy_layer(0);
}

const void* layer_stager::before_attention(uint32_t layer, uint32_t layers) {
  if (layer + 1 < layers)
    copy_layer(layer + 1);
  cudaStreamWaitEvent(as_stream(compute_), as_event(copied_[layer % 2]), 0);
  return buffers_[layer % 2];
}

void layer_stager::after_attention(uint32_t layer) {
  cudaEventRecord(as_event(consumed_[layer % 2]), as_stream(compute_));
}

} // namespace kvtier::model::cuda
