#include "sim/link_model.hpp"

#include <algorithm>

namespace kvtier::sim {

double link_model::submit(double now, uint64_t bytes, uint64_t operations, double gbps_cap) {
  double gbps = gbps_cap > 0 ? std::min(profile_.gbps, gbps_cap) : profile_.gbps;
  double start = std::max(now, busy_until_);
  double duration = profile_.latency_us * 1e-6 + static_cast<double>(operations) * profile_.per_op_us * 1e-6 +
      static_cast<double>(bytes) / (gbps * 1e9);
  busy_until_ = start + duration;
  bytes_ += bytes;
  operations_ += operations;
  busy_seconds_ += duration;
  return busy_until_;
}

pcie_model::pcie_model(const pcie_profile& profile)
    : duplex_gbps_(profile.duplex_gbps), h2d_(profile.h2d), d2h_(profile.d2h) {
}

double pcie_model::submit_h2d(double now, uint64_t bytes, uint64_t operations) {
  double start = std::max(now, h2d_.busy_until());
  double cap = d2h_.busy_until() > start ? duplex_gbps_ / 2 : 0;
  return h2d_.submit(now, bytes, operations, cap);
}

double pcie_model::submit_d2h(double now, uint64_t bytes, uint64_t operations) {
  double start = std::max(now, d2h_.busy_until());
  double cap = h2d_.busy_until() > start ? duplex_gbps_ / 2 : 0;
  return d2h_.submit(now, bytes, operations, cap);
}

double nvme_model::submit(double now, uint64_t bytes, uint64_t operations, double gbps, double iops, double& busy) {
  double start = std::max(now, busy_until_);
  double duration = profile_.latency_us * 1e-6 +
      std::max(static_cast<double>(operations) / iops, static_cast<double>(bytes) / (gbps * 1e9));
  busy_until_ = start + duration;
  busy += duration;
  return busy_until_;
}

double nvme_model::submit_read(double now, uint64_t bytes, uint64_t operations) {
  read_bytes_ += bytes;
  read_ops_ += operations;
  return submit(now, bytes, operations, profile_.read_gbps, profile_.read_iops, read_busy_);
}

double nvme_model::submit_write(double now, uint64_t bytes, uint64_t operations) {
  write_bytes_ += bytes;
  write_ops_ += operations;
  return submit(now, bytes, operations, profile_.write_gbps, profile_.write_iops, write_busy_);
}

} // namespace kvtier::sim
