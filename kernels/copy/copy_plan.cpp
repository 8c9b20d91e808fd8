#include "kernels/copy/copy_plan.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

namespace kvtier::copy {

std::string check_request(const move_request& request, const pool_shape& shape) {
  auto is_pool = [](tier t) { return t == tier::hbm || t == tier::dram; };
  if (!is_pool(request.from) || !is_pool(request.to) || request.from == request.to)
    return "a copy moves between hbm and dram, one way";
  uint32_t from_slots = request.from == tier::hbm ? shape.hbm_slots : shape.dram_slots;
  uint32_t to_slots = request.to == tier::hbm ? shape.hbm_slots : shape.dram_slots;
  if (request.first_layer >= shape.layers)
    return "first_layer is past the model's layers";
  if (request.layer_count > shape.layers - request.first_layer)
    return "layer range is past the model's layers";
  for (const auto& m : request.moves)
    if (m.from_slot >= from_slots || m.to_slot >= to_slots)
      return "a slot is outside its pool";
  return {};
}

layer_range layers_of(const move_request& request, const pool_shape& shape) {
  uint32_t count = request.layer_count == 0 ? shape.layers - request.first_layer : request.layer_count;
  return {request.first_layer, count};
}

std::vector<dram_run> dram_runs(std::span<const slot_pair> moves, bool dram_is_from, bool whole_blocks) {
  std::vector<dram_run> runs;
  auto dram_slot = [&](size_t i) { return dram_is_from ? moves[i].from_slot : moves[i].to_slot; };
  for (size_t i = 0; i < moves.size(); ++i) {
    if (whole_blocks && !runs.empty()) {
      auto& last = runs.back();
      if (dram_slot(i) == dram_slot(last.first) + last.count) {
        ++last.count;
        continue;
      }
    }
    runs.push_back({static_cast<uint32_t>(i), 1});
  }
  return runs;
}

uint32_t blocks_per_chunk(uint64_t chunk_bytes, uint64_t bytes_per_block) {
  if (bytes_per_block == 0)
    return 1;
  uint64_t n = chunk_bytes / bytes_per_block;
  return static_cast<uint32_t>(std::clamp<uint64_t>(n, 1, std::numeric_limits<uint32_t>::max()));
}

double estimate_seconds(const path_cost& cost, size_t runs, uint64_t bytes) {
  if (cost.gbps <= 0)
    return std::numeric_limits<double>::infinity();
  return static_cast<double>(runs) * cost.per_run_us * 1e-6 + static_cast<double>(bytes) / (cost.gbps * 1e9);
}

copy_path choose_path(const direction_costs& costs, size_t runs, size_t blocks, uint64_t bytes, bool allow_sm_copy,
                      bool spare_sms) {
  if (spare_sms && costs.dma_2d.gbps > 0) {
    // Strided DMA launches no kernels and kept its rate beside a GEMM, where
    // the staged paths' convert kernel waited for SMs (2 MiB blocks: 49 vs
    // 16 GB/s on the H200). But it pays a DMA per block: where that costs
    // over twice the batched path (32 KiB blocks), batched DMA with its short
    // convert kernel still moved more beside the GEMM (13 vs 8 GB/s).
    double strided = estimate_seconds(costs.dma_2d, blocks, bytes);
    double batched = estimate_seconds(costs.dma_batch, runs, bytes);
    return strided <= 2 * batched ? copy_path::dma_2d : copy_path::dma_batch;
  }
  if (spare_sms) // no strided DMA measured: still no copy kernels beside compute
    allow_sm_copy = false;
  copy_path best = copy_path::host_staged;
  double best_s = std::numeric_limits<double>::infinity();
  // Ties go to the earlier path: DMA-only paths first (no CPU, no SMs).
  for (auto p : {copy_path::dma_batch, copy_path::dma_2d, copy_path::dma_runs, copy_path::host_staged,
                 copy_path::sm_copy, copy_path::split}) {
    if ((p == copy_path::sm_copy || p == copy_path::split) && !allow_sm_copy)
      continue;
    double s = estimate_seconds(costs.of(p), p == copy_path::dma_2d ? blocks : runs, bytes);
    if (s < best_s) {
      best_s = s;
      best = p;
    }
  }
  return best;
}

mover_costs costs_from_profile(const pcie_profile& pcie) {
  // Before measurement: DMA pays the profile's per-op cost per run; the
  // staged path pays a small per-block memcpy cost and runs at ~97% of the
  // link (one DMA per chunk); batching halves the per-op cost (H200: 18.3 vs
  // 8.7 GB/s at 32 KiB).
  auto fill = [](const link_profile& l) {
    direction_costs c;
    c.dma_runs = {l.per_op_us, l.gbps};
    c.dma_batch = {l.per_op_us / 2, l.gbps};
    c.dma_2d = {l.per_op_us, l.gbps * 0.95};
    c.host_staged = {0.05, l.gbps * 0.97};
    c.sm_copy = {0.01, l.gbps * 0.9};
    c.split = {0.01, l.gbps * 0.97};
    return c;
  };
  mover_costs m;
  m.h2d = fill(pcie.h2d);
  m.d2h = fill(pcie.d2h);
  m.measured = false;
  return m;
}

path_cost fit_cost(size_t runs_a, double seconds_a, size_t runs_b, double seconds_b, uint64_t bytes) {
  path_cost c;
  if (runs_a > runs_b && seconds_a > seconds_b)
    c.per_run_us = (seconds_a - seconds_b) / static_cast<double>(runs_a - runs_b) * 1e6;
  double transfer_s = seconds_b - static_cast<double>(runs_b) * c.per_run_us * 1e-6;
  if (transfer_s <= 0)
    transfer_s = seconds_b;
  c.gbps = transfer_s > 0 ? static_cast<double>(bytes) / transfer_s / 1e9 : 0;
  return c;
}

path_cost fit_cost_by_bytes(size_t runs, double seconds_a, uint64_t bytes_a, double seconds_b, uint64_t bytes_b) {
  path_cost c;
  if (bytes_a <= bytes_b || seconds_a <= seconds_b || runs == 0) {
    c.gbps = seconds_a > 0 ? static_cast<double>(bytes_a) / seconds_a / 1e9 : 0;
    return c;
  }
  double per_byte = (seconds_a - seconds_b) / static_cast<double>(bytes_a - bytes_b);
  c.gbps = 1e-9 / per_byte;
  double fixed = seconds_a - per_byte * static_cast<double>(bytes_a);
  c.per_run_us = fixed > 0 ? fixed / static_cast<double>(runs) * 1e6 : 0;
  return c;
}

uint32_t dma_streams_beside_compute(const char* connections_env) {
  // A lane's streams: copy, convert, mapped and 7 more DMA streams; two lanes
  // plus the model's own make ~22, so 32 queues give every one its own.
  long queues = 8;
  if (connections_env != nullptr && *connections_env != '\0') {
    char* end = nullptr;
    long v = std::strtol(connections_env, &end, 10);
    if (end != nullptr && *end == '\0' && v > 0)
      queues = v;
  }
  return queues >= 32 ? 8 : 2;
}

} // namespace kvtier::copy
