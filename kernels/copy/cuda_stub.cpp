// Built when nvcc was not found: the GPU mover is absent, and says so.

#include "kernels/copy/cuda_mover.hpp"

namespace kvtier::copy {

gpu_probe probe_gpu(int) {
  gpu_probe p;
  p.reason = "kvtier was built without CUDA (no nvcc at build time)";
  return p;
}

std::unique_ptr<tier_mover> make_cuda_mover(const mover_options&, std::string* why) {
  if (why)
    *why = probe_gpu(0).reason;
  return nullptr;
}

std::optional<link_figures> measure_link(int, std::string* why) {
  if (why)
    *why = probe_gpu(0).reason;
  return std::nullopt;
}

} // namespace kvtier::copy
