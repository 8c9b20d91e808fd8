#pragma once
// Small helpers of the GPU mover's host code: CUDA errors as text, and the
// abort for calls that fail only on a kvtier bug or a broken GPU.

#include <cuda_runtime.h>

#include <chrono>
#include <string>

namespace kvtier::copy::gpu {

using clock_type = std::chrono::steady_clock;

/// "what: cudaErrorX (description)".
std::string cuda_text(const char* what, cudaError_t e);

/// Aborts with `what` unless `e` is cudaSuccess: set-up calls whose failure
/// leaves no mover to report through.
void must(cudaError_t e, const char* what);

} // namespace kvtier::copy::gpu
