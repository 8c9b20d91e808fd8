#include "sim/link_model.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::sim;

TEST(link_model, latency_plus_operations_plus_bytes) {
  link_model link({50.0, 5.0, 0.5});
  // 5 us + 10 * 0.5 us + 1e9 B / 50e9 B/s = 0.02001 s
  EXPECT_DOUBLE_EQ(link.submit(0.0, 1'000'000'000, 10), 0.02001);
  EXPECT_EQ(link.bytes(), 1'000'000'000u);
  EXPECT_EQ(link.operations(), 10u);
}

TEST(link_model, fifo_queueing) {
  link_model link({50.0, 5.0, 0.5});
  double first = link.submit(0.0, 1'000'000'000, 10);
  double second = link.submit(0.001, 1'000'000'000, 10); // waits for the first
  EXPECT_DOUBLE_EQ(second, first + 0.02001);
  double later = link.submit(1.0, 500'000'000, 1); // idle link: starts at once
  EXPECT_DOUBLE_EQ(later, 1.0 + 5e-6 + 0.5e-6 + 0.01);
  EXPECT_DOUBLE_EQ(link.busy_seconds(), 0.02001 * 2 + 5e-6 + 0.5e-6 + 0.01);
}

TEST(pcie_model, both_directions_share_the_duplex_limit) {
  pcie_profile p;
  p.h2d = {50.0, 0.0, 0.0};
  p.d2h = {50.0, 0.0, 0.0};
  p.duplex_gbps = 80.0;
  pcie_model pcie(p);
  EXPECT_DOUBLE_EQ(pcie.submit_h2d(0.0, 50'000'000'000, 1), 1.0); // alone: 50 GB/s
  EXPECT_DOUBLE_EQ(pcie.submit_d2h(0.0, 40'000'000'000, 1), 1.0); // beside it: 40 GB/s
  EXPECT_DOUBLE_EQ(pcie.submit_d2h(2.0, 50'000'000'000, 1), 3.0); // alone again
}

TEST(nvme_model, iops_or_bandwidth_whichever_binds) {
  nvme_profile p;
  p.read_gbps = 6.0;
  p.read_iops = 1'000'000;
  p.write_gbps = 4.0;
  p.write_iops = 100'000;
  p.latency_us = 100;
  nvme_model nvme(p);
  // 1,000 x 4 KiB reads: IOPS binds (1 ms) over bytes (0.68 ms).
  EXPECT_DOUBLE_EQ(nvme.submit_read(0.0, 4'096'000, 1000), 100e-6 + 1000.0 / 1'000'000);
  // 10 x 2 MiB writes start when the reads end: bandwidth binds.
  double t = 100e-6 + 1e-3;
  EXPECT_DOUBLE_EQ(nvme.submit_write(0.0, 20'971'520, 10), t + 100e-6 + 20'971'520 / 4e9);
}
