#include "kernels/copy/cuda/cuda_support.hpp"

#include <cstdio>
#include <cstdlib>

namespace kvtier::copy::gpu {

std::string cuda_text(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

void must(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kvtier: bug or broken GPU: %s\n", cuda_text(what, e).c_str());
    std::abort();
  }
}

} // namespace kvtier::copy::gpu
