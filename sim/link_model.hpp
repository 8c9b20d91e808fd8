#pragma once
// Timing models of the links data crosses, on a clock of seconds.
//
// link_model: one direction of one link, a FIFO server. A transfer submitted
// at `now` starts when the link is free and takes
//   latency + operations * per_op + bytes / bandwidth.
// pcie_model: both directions of a PCIe link. Each direction is a link_model;
// while the other direction is busy a transfer gets at most half the duplex
// bandwidth (the H200 measured 79.5 GB/s for both at once, below 2 x 50).
// nvme_model: one device serving reads and writes from one queue:
//   latency + max(operations / IOPS, bytes / bandwidth) per batch.

#include "runtime/hardware.hpp"

#include <cstdint>

namespace kvtier::sim {

class link_model {
public:
  explicit link_model(const link_profile& profile) : profile_(profile) {}

  /// Returns the finish time of a transfer submitted at `now`.
  double submit(double now, uint64_t bytes, uint64_t operations, double gbps_cap = 0);

  double busy_until() const { return busy_until_; }
  uint64_t bytes() const { return bytes_; }
  uint64_t operations() const { return operations_; }
  double busy_seconds() const { return busy_seconds_; }
  const link_profile& profile() const { return profile_; }

private:
  link_profile profile_;
  double busy_until_ = 0;
  uint64_t bytes_ = 0;
  uint64_t operations_ = 0;
  double busy_seconds_ = 0;
};

class pcie_model {
public:
  explicit pcie_model(const pcie_profile& profile);

  double submit_h2d(double now, uint64_t bytes, uint64_t operations);
  double submit_d2h(double now, uint64_t bytes, uint64_t operations);

  const link_model& h2d() const { return h2d_; }
  const link_model& d2h() const { return d2h_; }

private:
  double duplex_gbps_;
  link_model h2d_;
  link_model d2h_;
};

class nvme_model {
public:
  explicit nvme_model(const nvme_profile& profile) : profile_(profile) {}

  double submit_read(double now, uint64_t bytes, uint64_t operations);
  double submit_write(double now, uint64_t bytes, uint64_t operations);

  uint64_t read_bytes() const { return read_bytes_; }
  uint64_t write_bytes() const { return write_bytes_; }
  uint64_t read_operations() const { return read_ops_; }
  uint64_t write_operations() const { return write_ops_; }
  double read_busy_seconds() const { return read_busy_; }
  double write_busy_seconds() const { return write_busy_; }

private:
  double submit(double now, uint64_t bytes, uint64_t operations, double gbps, double iops, double& busy);

  nvme_profile profile_;
  double busy_until_ = 0;
  uint64_t read_bytes_ = 0, write_bytes_ = 0, read_ops_ = 0, write_ops_ = 0;
  double read_busy_ = 0, write_busy_ = 0;
};

} // namespace kvtier::sim
