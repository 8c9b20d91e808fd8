// Planning and the chooser: runs, chunks, request checks, costs.

#include "kernels/copy/copy_plan.hpp"

#include <gtest/gtest.h>

using namespace kvtier;
using namespace kvtier::copy;

TEST(copy_plan, adjacent_ascending_dram_slots_form_runs) {
  std::vector<slot_pair> moves{{5, 0}, {6, 9}, {7, 3}, {2, 4}, {3, 1}, {9, 2}, {8, 8}};
  auto runs = dram_runs(moves, true, true);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs[0].first, 0u);
  EXPECT_EQ(runs[0].count, 3u); // 5, 6, 7
  EXPECT_EQ(runs[1].count, 2u); // 2, 3
  EXPECT_EQ(runs[2].count, 1u); // 9
  EXPECT_EQ(runs[3].count, 1u); // 8: descending is not a run
  // The DRAM side of a D2H move is its to_slot.
  // (to_slots 0, 9, 3, 4, 1, 2, 8: 3 -> 4 and 1 -> 2 are adjacent and ascending)
  EXPECT_EQ(dram_runs(moves, false, true).size(), 5u);
  // A layer range is never contiguous across blocks.
  EXPECT_EQ(dram_runs(moves, true, false).size(), moves.size());
}

TEST(copy_plan, chunks_hold_at_least_one_block) {
  EXPECT_EQ(blocks_per_chunk(32u << 20, 2u << 20), 16u);
  EXPECT_EQ(blocks_per_chunk(32u << 20, 32u << 10), 1024u);
  EXPECT_EQ(blocks_per_chunk(1u << 20, 2u << 20), 1u);
}

TEST(copy_plan, requests_are_checked_against_the_pools) {
  pool_shape shape{8, 16, 4, 1024};
  move_request r{tier::hbm, tier::dram, {{7, 15}}};
  EXPECT_EQ(check_request(r, shape), "");
  r.moves = {{8, 0}};
  EXPECT_EQ(check_request(r, shape), "a slot is outside its pool");
  r.moves = {{0, 0}};
  r.to = tier::hbm;
  EXPECT_EQ(check_request(r, shape), "a copy moves between hbm and dram, one way");
  r.to = tier::nvme;
  EXPECT_EQ(check_request(r, shape), "a copy moves between hbm and dram, one way");
  r.to = tier::dram;
  r.first_layer = 3;
  r.layer_count = 2;
  EXPECT_EQ(check_request(r, shape), "layer range is past the model's layers");
  r.layer_count = 0;
  EXPECT_EQ(check_request(r, shape), "");
  EXPECT_EQ(layers_of(r, shape).first, 3u);
  EXPECT_EQ(layers_of(r, shape).count, 1u);
}

TEST(copy_plan, the_chooser_takes_staging_for_small_scattered_blocks_and_dma_for_large_runs) {
  direction_costs c;
  c.dma_runs = {3.0, 48};     // per-run DMA: ~3 us per cudaMemcpyAsync
  c.dma_batch = {1.2, 50};    // batched
  c.host_staged = {0.02, 45}; // one DMA per chunk, CPU packing hidden behind it
  c.sm_copy = {0.0, 49.5};
  c.dma_2d = {3.5, 47}; // one strided DMA per block
  // 4,096 scattered 32 KiB blocks: per-run costs dominate.
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * 32768, false), copy_path::host_staged);
  // The same bytes in 16 runs: DMA wins, with no CPU copy at all.
  EXPECT_EQ(choose_path(c, 16, 4096, 4096ull * 32768, false), copy_path::dma_batch);
  // The mapped-memory kernel only when allowed.
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * 32768, true), copy_path::sm_copy);
  // Split (DMA and kernel at once) when it measured faster, and only when allowed.
  c.split = {0.0, 53};
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * 32768, true), copy_path::split);
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * 32768, false), copy_path::host_staged);
  // Beside compute (spare_sms): no copy kernels. 32 KiB blocks: a strided DMA
  // per block (3.5 us) costs over twice the batched path: batched DMA.
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * 32768, true, true), copy_path::dma_batch);
  // 2 MiB blocks: the per-block cost hides behind the bytes: strided DMA, no kernel at all.
  EXPECT_EQ(choose_path(c, 4096, 4096, 4096ull * (2u << 20), true, true), copy_path::dma_2d);
  // Without a measured strided DMA, beside compute still means no copy kernels.
  auto no_strided = c;
  no_strided.dma_2d.gbps = 0;
  EXPECT_EQ(choose_path(no_strided, 4096, 4096, 4096ull * 32768, true, true), copy_path::host_staged);
  c.split = {};
  // A path with no measured bandwidth is never taken.
  c.dma_batch.gbps = 0;
  EXPECT_EQ(choose_path(c, 16, 4096, 4096ull * 32768, false), copy_path::dma_runs);
}

TEST(copy_plan, the_two_point_fit_recovers_per_run_cost_and_bandwidth) {
  path_cost truth{2.5, 40};
  uint64_t bytes = 256ull << 20;
  double a = estimate_seconds(truth, 1024, bytes);
  double b = estimate_seconds(truth, 1, bytes);
  auto fit = fit_cost(1024, a, 1, b, bytes);
  EXPECT_NEAR(fit.per_run_us, 2.5, 1e-6);
  EXPECT_NEAR(fit.gbps, 40, 1e-6);
  auto by_bytes = fit_cost_by_bytes(512, estimate_seconds(truth, 512, bytes), bytes,
                                    estimate_seconds(truth, 512, bytes / 2), bytes / 2);
  EXPECT_NEAR(by_bytes.per_run_us, 2.5, 1e-6);
  EXPECT_NEAR(by_bytes.gbps, 40, 1e-6);
}

TEST(copy_plan, strided_dma_pays_per_block_not_per_run) {
  direction_costs c;
  c.dma_2d = {1.0, 50};
  c.host_staged = {0.0, 45};
  // 64 blocks of 2 MiB: per-block cost is small against the bytes.
  EXPECT_EQ(choose_path(c, 1, 64, 64ull << 21, false), copy_path::dma_2d);
  // 4,096 blocks of 32 KiB in one DRAM run still cost 4,096 strided DMAs.
  EXPECT_EQ(choose_path(c, 1, 4096, 4096ull << 15, false), copy_path::host_staged);
  // Beside compute, the path without kernels whatever it costs.
  EXPECT_EQ(choose_path(c, 1, 4096, 4096ull << 15, false, true), copy_path::dma_2d);
  c.dma_2d.gbps = 0; // unavailable: the usual choice
  EXPECT_EQ(choose_path(c, 1, 4096, 4096ull << 15, false, true), copy_path::host_staged);
}

TEST(copy_plan, profile_figures_seed_the_costs) {
  pcie_profile p;
  auto c = costs_from_profile(p);
  EXPECT_FALSE(c.measured);
  EXPECT_DOUBLE_EQ(c.h2d.dma_runs.gbps, p.h2d.gbps);
  EXPECT_DOUBLE_EQ(c.d2h.dma_runs.per_run_us, p.d2h.per_op_us);
  EXPECT_GT(c.h2d.host_staged.gbps, 0);
}

TEST(copy_plan, dma_streams_stay_clear_of_the_models_hardware_queue) {
  EXPECT_EQ(dma_streams_beside_compute(nullptr), 2u); // CUDA's default: 8 queues
  EXPECT_EQ(dma_streams_beside_compute(""), 2u);
  EXPECT_EQ(dma_streams_beside_compute("8"), 2u);
  EXPECT_EQ(dma_streams_beside_compute("31"), 2u);
  EXPECT_EQ(dma_streams_beside_compute("32"), 8u);
  EXPECT_EQ(dma_streams_beside_compute("64"), 8u);
  EXPECT_EQ(dma_streams_beside_compute("32 queues"), 2u); // not a number: the default
  EXPECT_EQ(dma_streams_beside_compute("-4"), 2u);
}
