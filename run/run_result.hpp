#pragma once
// What one run of the actor graph leaves behind, simulated or real: every
// actor's metrics, the links' counters, and how long it took.

#include "runtime/metrics.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier {

/// One interval on a resource's timeline (--chrome-trace; recorded by the
/// simulated backend).
struct timeline_event {
  enum class lane : uint8_t { compute, h2d, d2h, nvme_read, nvme_write };
  lane where;
  double start_s;
  double end_s;
  uint64_t bytes; // transfers: bytes moved; compute: tokens in the step
  uint32_t count; // transfers: blocks; compute: sequences
};

struct link_report {
  uint64_t bytes = 0;
  uint64_t operations = 0;
  double busy_seconds = 0;
  double limit_gbps = 0;
};

struct run_result {
  run_metrics metrics;
  uint64_t requests_total = 0;
  double simulated_seconds = 0; // the run's clock: virtual in simulation, wall time in real runs
  double wall_seconds = 0;
  uint64_t messages = 0; // scheduler events (simulation only)
  std::string compute;   // what computed the steps (real runs): "modeled", "model (cpu)"
  link_report h2d, d2h, nvme_read, nvme_write;
  std::vector<timeline_event> timeline; // when a timeline was recorded (simulation only)
};

} // namespace kvtier
