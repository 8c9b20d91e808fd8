// Fuzz target: the hardware profile parser, kvtier::parse_hardware_profile(text, name).
// Invariants: a rejected profile is an error that names the file; an accepted
// profile holds finite numbers, positive bandwidths and efficiencies in (0, 1].

#include "tests/fuzz/fuzz_require.hpp"

#include "runtime/config.hpp"
#include "runtime/hardware_profile.hpp"
#include "runtime/error.hpp"

#include <cmath>

namespace {

using kvtier::fuzz::fuzz_require;

void require_positive(double value, const char* key) {
  fuzz_require(std::isfinite(value) && value > 0, "accepted profile has {} = {}", key, value);
}

void require_non_negative(double value, const char* key) {
  fuzz_require(std::isfinite(value) && value >= 0, "accepted profile has {} = {}", key, value);
}

void require_share(double value, const char* key) {
  fuzz_require(std::isfinite(value) && value > 0 && value <= 1, "accepted profile has {} = {}", key, value);
}

void check_link(const kvtier::link_profile& link, const char* gbps, const char* latency, const char* per_op) {
  require_positive(link.gbps, gbps);
  require_non_negative(link.latency_us, latency);
  require_non_negative(link.per_op_us, per_op);
}

void check_accepted(const kvtier::hardware_profile& hw) {
  require_positive(hw.gpu.hbm_gbps, "gpu.hbm_gbps");
  require_positive(hw.gpu.bf16_tflops, "gpu.bf16_tflops");
  require_share(hw.gpu.compute_efficiency, "gpu.compute_efficiency");
  require_share(hw.gpu.memory_efficiency, "gpu.memory_efficiency");
  require_non_negative(hw.gpu.step_overhead_us, "gpu.step_overhead_us");
  check_link(hw.pcie.h2d, "pcie.h2d.gbps", "pcie.h2d.latency_us", "pcie.h2d.per_op_us");
  check_link(hw.pcie.d2h, "pcie.d2h.gbps", "pcie.d2h.latency_us", "pcie.d2h.per_op_us");
  require_positive(hw.pcie.duplex_gbps, "pcie.duplex_gbps");
  require_positive(hw.nvme.read_gbps, "nvme_device.read_gbps");
  require_positive(hw.nvme.write_gbps, "nvme_device.write_gbps");
  require_positive(hw.nvme.read_iops, "nvme_device.read_iops");
  require_positive(hw.nvme.write_iops, "nvme_device.write_iops");
  require_non_negative(hw.nvme.latency_us, "nvme_device.latency_us");
  fuzz_require(hw.nvme.queue_depth > 0, "accepted profile has nvme_device.queue_depth 0");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string name = "fuzz-profile.toml";
  auto hw = kvtier::parse_hardware_profile(kvtier::fuzz::as_text(data, size), name);
  if (!hw) {
    auto message = kvtier::describe(hw.error());
    fuzz_require(message.find(name) != std::string::npos, "profile error does not name the file: {}", message);
    return 0;
  }
  check_accepted(*hw);
  return 0;
}
