#pragma once
// The peer copy's kernel, callable from host C++ (C++17 so that nvcc under
// CMake 3.25 compiles the .cu; no C++20 headers).

#include <cuda_runtime_api.h>

#include <cstdint>

namespace kvtier::copy::cuda {

/// One unit of work: `bytes` (a multiple of 16) from src + from_offset to
/// dst + to_offset.
struct peer_piece {
  uint64_t from_offset;
  uint64_t to_offset;
  uint64_t bytes;
};

/// Copies every piece (`pieces`: device memory of the launching device) with
/// `ctas` CTAs of 256 threads on `stream`; each CTA takes pieces
/// blockIdx.x, blockIdx.x + ctas, ... One of src and dst may be a peer
/// device's memory (peer access enabled from the launching device). Bases
/// 16-byte aligned.
cudaError_t launch_peer_copy(const void* src, void* dst, const peer_piece* pieces, uint32_t piece_count, unsigned ctas,
                             cudaStream_t stream);

} // namespace kvtier::copy::cuda
