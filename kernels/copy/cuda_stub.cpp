// Built when nvcc was not found: the GPU mover and the peer copier are
// absent, and say so.

#include "kernels/copy/cuda_mover.hpp"
#include "kernels/copy/peer_copy.hpp"

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

std::unique_ptr<peer_copier> make_cuda_peer_copier(const peer_options&, std::string* why) {
  if (why)
    *why = probe_gpu(0).reason;
  return nullptr;
}

} // namespace kvtier::copy
