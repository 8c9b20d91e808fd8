// The GPU mover's start-up calibration: what each path costs in each
// direction on this machine, fitted into the chooser's cost model
// (copy_plan.hpp). It overwrites the pools' first slots.

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cuda/gpu_mover.hpp"

#include <algorithm>
#include <cstdlib>
#include <future>
#include <numeric>
#include <random>

namespace kvtier::copy::gpu {

double gpu_mover::time_request(tier from, tier to, std::vector<slot_pair> moves, copy_path path, uint32_t layer_count) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) { // first run warms up; keep the best of the rest
    std::promise<void> landed;
    auto start = clock_type::now();
    move_request r{from, to, moves, 0, layer_count, 0, path};
    submit(std::move(r), [&](const move_result&) { landed.set_value(); });
    landed.get_future().wait();
    double s = std::chrono::duration<double>(clock_type::now() - start).count();
    if (rep > 0)
      best = std::min(best, s);
  }
  return best;
}

// Measures every path in both directions over the pools' first slots:
// the same bytes once as scattered blocks (one run each) and once as one
// run, then fits per-run cost and bandwidth (copy_plan.hpp). Also finds
// the fewest CTAs with which the mapped-memory kernel fills the link, and
// the DMA share of a split chunk that moves scattered blocks fastest.
void gpu_mover::calibrate() {
  uint64_t bb = o_.shape.block_bytes();
  uint32_t slots = std::min(o_.shape.hbm_slots, o_.shape.dram_slots);
  uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(slots, (256ull << 20) / bb));
  if (n < 16)
    return; // pools too small to say anything; keep the profile's figures
  // Scattered: DRAM slots in a fixed random order. (Descending slots are
  // not scattered to a DMA engine: it ran them at the contiguous rate.)
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937{20261129});
  std::vector<slot_pair> scattered, contiguous;
  for (uint32_t i = 0; i < n; ++i) {
    scattered.push_back({order[i], i});
    contiguous.push_back({i, i});
  }
  auto flip = [](std::vector<slot_pair> v) {
    for (auto& p : v)
      std::swap(p.from_slot, p.to_slot);
    return v;
  };
  uint64_t bytes = uint64_t{n} * bb;
  unsigned best_ctas = sm_ctas_;
  double best_s = 1e30;
  std::vector<std::pair<unsigned, double>> sweep;
  for (unsigned ctas : {2u, 4u, 8u, 12u, 16u, 24u, 32u}) {
    sm_ctas_ = ctas;
    double s = time_request(tier::dram, tier::hbm, contiguous, copy_path::sm_copy);
    sweep.push_back({ctas, s});
    best_s = std::min(best_s, s);
  }
  for (auto [ctas, s] : sweep)
    if (s <= best_s / 0.97) { // fewest CTAs within 3% of the best
      best_ctas = ctas;
      break;
    }
  sm_ctas_ = best_ctas;
  // Streams for the DMA paths: the fewest within 3% of the fastest on
  // scattered blocks (both directions at once would share them).
  if (o_.dma_streams == 0) {
    std::vector<std::pair<unsigned, double>> by_streams;
    double fastest = 1e30;
    // Measured on an idle GPU, but used beside the model: no more streams than
    // keep clear of its hardware queue (copy_plan.hpp).
    const uint32_t most = dma_streams_beside_compute(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"));
    for (unsigned k : {1u, 2u, 4u, 8u}) {
      if (k > most)
        break;
      dma_streams_ = k;
      double s = time_request(tier::dram, tier::hbm, scattered, copy_path::dma_batch) +
          time_request(tier::hbm, tier::dram, flip(scattered), copy_path::dma_batch);
      by_streams.push_back({k, s});
      fastest = std::min(fastest, s);
    }
    for (auto [k, s] : by_streams)
      if (s <= fastest / 0.97) {
        dma_streams_ = k;
        break;
      }
  }
  for (bool h2d : {true, false}) {
    auto& dir = h2d ? costs_.h2d : costs_.d2h;
    tier from = h2d ? tier::dram : tier::hbm;
    tier to = h2d ? tier::hbm : tier::dram;
    for (auto path : {copy_path::dma_runs, copy_path::dma_batch, copy_path::host_staged, copy_path::sm_copy}) {
      double a = time_request(from, to, h2d ? scattered : flip(scattered), path);
      double b = time_request(from, to, h2d ? contiguous : flip(contiguous), path);
      dir.of(path) = fit_cost(n, a, 1, b, bytes);
    }
    // One strided DMA per block whatever the runs: separate per-block cost
    // from bandwidth by moving all layers, then half of them.
    uint32_t half = std::max(1u, o_.shape.layers / 2);
    double all = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::dma_2d);
    double part = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::dma_2d, half);
    dir.dma_2d = half < o_.shape.layers ? fit_cost_by_bytes(n, all, bytes, part, bytes / o_.shape.layers * half)
                                        : path_cost{all / n * 1e6, 1e6};
    // Split: the DMA share that moves scattered blocks fastest, then its
    // cost like the other paths'.
    double fastest = 1e30;
    double best_share = dir.split_dma_share;
    for (double share : {0.2, 0.3, 0.4, 0.5, 0.6, 0.7}) {
      dir.split_dma_share = share;
      double s = time_request(from, to, h2d ? scattered : flip(scattered), copy_path::split);
      if (s < fastest)
        fastest = s, best_share = share;
    }
    dir.split_dma_share = best_share;
    dir.split =
        fit_cost(n, fastest, 1, time_request(from, to, h2d ? contiguous : flip(contiguous), copy_path::split), bytes);
  }
  costs_.measured = true;
  costs_.dma_streams = dma_streams_;
  costs_.sm_copy_ctas = sm_ctas_;
}

} // namespace kvtier::copy::gpu
