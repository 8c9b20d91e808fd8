#pragma once
// Numbers that describe a machine: the GPU, its PCIe link, host DRAM and
// NVMe. Loaded from configs/hardware/*.toml; read by the simulator's
// models and by the real transfer engine's chooser (calibration writes them).

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier {

struct gpu_profile {
  std::string name = "h200";
  uint64_t hbm_bytes = 141'000'000'000;
  double hbm_gbps = 4160;                  // achievable device-to-device copy bandwidth
  double bf16_tflops = 790;                // achievable dense bf16 matmul throughput
  double compute_efficiency = 0.6;         // fraction of bf16_tflops a forward pass reaches
  double memory_efficiency = 0.8;          // fraction of hbm_gbps weight/KV reads reach
  double step_overhead_us = 150;           // launch + sampling + framework cost per step
  uint64_t reserved_bytes = 4'000'000'000; // activations, CUDA context, workspace
};

struct link_profile {
  double gbps = 50;      // bandwidth one way, GB/s (1e9 bytes)
  double latency_us = 5; // fixed time before the first byte lands
  double per_op_us = 1;  // cost per submitted operation (one per block run)
};

struct pcie_profile {
  link_profile h2d{50.4, 5, 0.5};
  link_profile d2h{53.3, 5, 0.5};
  double duplex_gbps = 79.5; // both directions at once, total
};

struct nvme_profile {
  double read_gbps = 6.5;
  double write_gbps = 5.0;
  double read_iops = 1'000'000;
  double write_iops = 800'000;
  uint32_t queue_depth = 32;
  double latency_us = 80;
};

/// One model's forward pass as measured on this GPU (`kvtier calibrate
/// --compute`, fitted by runtime/compute_fit.hpp). For that model it replaces
/// the roofline: step time = dense(tokens in the step) + attention. In a
/// decode-only step attention reads its KV at decode_attention_gbps (the
/// decode kernel); in a step with a prefill chunk the chunks' attention runs
/// at prefill_attention_tflops (the chunked-prefill kernel) and the decode
/// rows' KV at mixed_decode_attention_gbps (the decode kernel, launched beside it).
struct measured_compute {
  std::string model;                      // the [model] name it was measured with
  std::vector<double> dense_tokens;       // knots, ascending: tokens in the step
  std::vector<double> dense_ms;           // the step without attention at each knot
  double decode_attention_gbps = 0;       // KV bytes per second a decode step's attention reads
  double prefill_attention_tflops = 0;    // prefill chunks' attention FLOPs per second
  double mixed_decode_attention_gbps = 0; // decode rows' KV bytes per second beside a prefill chunk (0: as decode)
  bool present() const { return !model.empty() && !dense_tokens.empty(); }
};

struct hardware_profile {
  std::string name = "h200";
  gpu_profile gpu;
  uint64_t dram_bytes = 2'000'000'000'000;
  pcie_profile pcie;
  nvme_profile nvme;
  /// The GPU's network interface, each direction (a 400 Gb/s RDMA NIC per GPU):
  /// what KV crosses between nodes of a cluster and to a remote tier.
  link_profile nic{50, 10, 1};
  uint64_t nvme_bytes = 7'680'000'000'000;
  measured_compute compute; // absent unless calibrated
};

} // namespace kvtier
