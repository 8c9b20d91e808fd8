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
  uint64_t kv_bytes = 0;   // the blocks' size in HBM: above `bytes` when quantized on offload
  double link_seconds = 0; // the link itself busy (GPU timing events); 0: not measured apart from busy_seconds
  // The host's part of the requests' spans, summed (link_counters); 0: not measured.
  uint64_t requests = 0;
  double issue_seconds = 0;
  double start_lag_seconds = 0;
  double end_lag_seconds = 0;
};

/// A real run's remote tier (L4), when it had one: it stands in the NVMe
/// tier's place below DRAM, so the lowest tier's metrics and the nvme_read
/// and nvme_write links are its own; these are what only it counts.
struct remote_tier_report {
  bool used = false;
  std::string where;            // "redis 127.0.0.1:6379"
  uint64_t missing_reads = 0;   // the key was gone: evicted by the server, or never stored
  uint64_t corrupted_reads = 0; // header or checksum wrong
  uint64_t failed_reads = 0;    // the server could not be reached
  uint64_t failed_writes = 0;
  uint64_t foreign_encoding_reads = 0; // written in another payload encoding (another offload_dtype)
};

struct run_result {
  run_metrics metrics;
  uint64_t requests_total = 0;
  double simulated_seconds = 0; // the run's clock: virtual in simulation, wall time in real runs
  double wall_seconds = 0;
  uint64_t messages = 0; // scheduler events (simulation only)
  std::string compute;   // what computed the steps (real runs): "modeled", "model (cpu)"
  link_report h2d, d2h, nvme_read, nvme_write;
  remote_tier_report remote;
  std::vector<timeline_event> timeline; // when a timeline was recorded (simulation only)
};

} // namespace kvtier
