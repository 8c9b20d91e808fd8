#pragma once
// Planning shared by both movers: request checks, runs of adjacent DRAM
// slots, chunks of the staging size, and the chooser's cost model.

#include "kernels/copy/mover.hpp"
#include "runtime/hardware.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvtier::copy {

/// The layer range a request selects, resolved against the pool.
struct layer_range {
  uint32_t first = 0;
  uint32_t count = 0;
};

/// Empty when `request` is valid for `shape`; else what is wrong.
std::string check_request(const move_request& request, const pool_shape& shape);
layer_range layers_of(const move_request& request, const pool_shape& shape);

/// Moves [first, first + count) whose DRAM slots ascend one by one: with all
/// layers selected they are one contiguous byte range in the DRAM pool.
struct dram_run {
  uint32_t first = 0;
  uint32_t count = 0;
};
/// `dram_is_from`: the DRAM slot is the move's from_slot (H2D). With
/// `whole_blocks` false (a layer range), every move is its own run.
std::vector<dram_run> dram_runs(std::span<const slot_pair> moves, bool dram_is_from, bool whole_blocks);

/// Blocks per staging chunk (at least one).
uint32_t blocks_per_chunk(uint64_t chunk_bytes, uint64_t bytes_per_block);

double estimate_seconds(const path_cost& cost, size_t runs, uint64_t bytes);

/// The cheapest available path for `blocks` blocks in `runs` DRAM runs;
/// sm_copy and split only when allowed; with `spare_sms`, the path that launches no
/// kernels (dma_2d) unless it costs over twice batched DMA (whose only kernel
/// is the short layout conversion).
copy_path choose_path(const direction_costs& costs, size_t runs, size_t blocks, uint64_t bytes, bool allow_sm_copy,
                      bool spare_sms = false);

/// Costs from a hardware profile's link figures, before any measurement.
mover_costs costs_from_profile(const pcie_profile& pcie);

/// The most DMA streams a lane may spread a request over without some of them
/// sharing a hardware work queue with a running model's stream: CUDA maps a
/// process's streams onto CUDA_DEVICE_MAX_CONNECTIONS queues (8 unless set),
/// and a copy in the model's queue waits for the kernels ahead of it. On the
/// H200 beside the forward, 4 or 8 streams under 8 queues moved demotions at
/// 7.7-7.9 GB/s, 1 or 2 streams at 43.4, and 4 streams under 32 queues at 43.2.
/// `connections_env`: the variable's value (nullptr: unset).
uint32_t dma_streams_beside_compute(const char* connections_env);

/// Two-point fit of `seconds = runs * per_run + bytes / gbps` from the same
/// bytes moved as `runs_a` and as `runs_b` runs (runs_a > runs_b).
path_cost fit_cost(size_t runs_a, double seconds_a, size_t runs_b, double seconds_b, uint64_t bytes);
/// The same from the same runs moving `bytes_a` and `bytes_b` (bytes_a > bytes_b).
path_cost fit_cost_by_bytes(size_t runs, double seconds_a, uint64_t bytes_a, double seconds_b, uint64_t bytes_b);

} // namespace kvtier::copy
