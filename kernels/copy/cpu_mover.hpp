#pragma once
// The CPU twin of the CUDA mover: "HBM" is ordinary host memory laid out
// layer-major, DRAM is 4 KiB-aligned host memory laid out block-major; a
// move is memcpy of each layer slice on a thread pool, one lane per direction
// so both directions run at once. Real bytes, the same callbacks: CI and
// machines without a GPU run the same actor graph.

#include "kernels/copy/mover.hpp"

#include <memory>

namespace kvtier::copy {

std::unique_ptr<tier_mover> make_cpu_mover(const mover_options& options);

} // namespace kvtier::copy
