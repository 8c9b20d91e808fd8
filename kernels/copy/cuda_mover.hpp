#pragma once
// The GPU mover's entry points, free of CUDA types so that any code may
// include this header. Built only with CUDA; without it the functions say so.

#include "kernels/copy/mover.hpp"

#include <memory>
#include <optional>
#include <string>

namespace kvtier::copy {

struct gpu_probe {
  bool usable = false;
  int device_count = 0;
  std::string device_name; // of the chosen device, when usable
  std::string reason;      // why not, when not usable
};

/// Asks the CUDA runtime for devices. ANY error counts as "no GPU" (without a
/// driver, cudaGetDeviceCount answers error 35, not "no device").
gpu_probe probe_gpu(int device);

/// The CUDA mover, or nullptr with `why` filled in.
std::unique_ptr<tier_mover> make_cuda_mover(const mover_options& options, std::string* why);

/// The link as one large pinned copy sees it (what a hardware profile's
/// [pcie] section holds): GB/s each way and both at once, and the time of a
/// 4 KiB copy as the fixed cost. Empty with `why` filled in without a GPU.
struct link_figures {
  double h2d_gbps = 0;
  double d2h_gbps = 0;
  double duplex_gbps = 0;
  double h2d_latency_us = 0;
  double d2h_latency_us = 0;
};
std::optional<link_figures> measure_link(int device, std::string* why);

} // namespace kvtier::copy
