#pragma once
// Measures the NVMe tier as kvtier sees it (through slot_store: headers,
// checksums and all) and turns the numbers into the hardware profile's
// [nvme_device] table, so the simulator's NVMe model runs on the same figures
// the real store reaches. bench/io uses the same load generator against fio.

#include "io/slot_store.hpp"
#include "runtime/hardware.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace kvtier::io {

struct load_result {
  uint64_t operations = 0;
  uint64_t errors = 0; // pages that completed with an error
  double seconds = 0;
  double iops = 0;
  double mib_s = 0;           // payload MiB/s (headers not counted)
  double mean_latency_us = 0; // queue_depth / iops (Little's law)
};

/// Keeps `queue_depth` one-page jobs in flight on uniformly random NVMe slots
/// (never two on one slot) for `seconds`; with fewer NVMe slots than
/// queue_depth, one job per slot. REQUIRES: queue_depth <= DRAM slots.
/// Reads expect the hashes fill_slots() wrote.
load_result run_random_load(slot_store& store, page_op op, uint32_t queue_depth, double seconds, uint64_t seed);

/// Writes every NVMe slot once, in order, from whatever the DRAM pool holds;
/// slot s gets hash bench_hash(s). Returns pages that failed.
uint64_t fill_slots(slot_store& store);
block_hash bench_hash(uint32_t nvme_slot);

/// Measures on a scratch slot file of `file_bytes` under `dir` (deleted
/// afterwards): 4 KiB at QD 1 (latency), 4 KiB at queue_depth (IOPS), 2 MiB at
/// queue_depth (bandwidth), reads and writes. Errors: errc::invalid_argument
/// when seconds_per_point is not in (0, 86400], queue_depth is 0, or the file
/// holds fewer 2 MiB slots than queue_depth; errc::io_failure when `dir`
/// cannot be created or the slot file cannot be opened.
caf::expected<nvme_profile> calibrate_nvme(const nvme_options& base, const std::string& dir, uint64_t file_bytes,
                                           double seconds_per_point);

} // namespace kvtier::io
