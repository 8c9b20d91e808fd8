#pragma once
// The Llama forward on the GPU: the CUDA twin of kernels/model's
// cpu_forward, over the same pool layout (paged_kv_pool, whose base is device
// memory here) and the same inputs. A step runs all its sequences at once:
// their positions are the rows of cuBLAS GEMMs (bf16 weights and inputs,
// float accumulation and outputs), RoPE and the K/V store are kernels, and
// attention reads the pool with each KV head once per query group: the
// tensor-core decode kernel (paged_decode.hpp) for steps of decode rows only,
// the tensor-core chunked-prefill kernel (paged_prefill.hpp) for any other
// step, the CUDA-core kernel of model_kernels.hpp for head shapes those two
// lack. Streamed blocks (paged_kv_pool::dram_bit) stay in the pinned DRAM
// pool and reach HBM layer by layer beside compute (layer_stager.hpp): tensor-
// core shapes only. Differences from the CPU
// twin: GEMM inputs are rounded to bf16, sums run in another order; the
// stated tolerances are in tests/kernels/model_cuda_check.cpp.
//
// Not thread-safe: one caller at a time. Block mass (want_block_mass) is a
// separate kernel after each layer's attention (model_kernels.hpp's
// block_mass), run only for the rows that asked.

#include "kernels/model/forward_cpu.hpp"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvtier::model {

class cuda_forward {
public:
  /// Uploads `weights`. nullptr and `why` when there is no usable GPU, the
  /// shape has no attention kernel, or memory runs out.
  static std::unique_ptr<cuda_forward> create(const llama_weights& weights, const paged_kv_pool& pool,
                                              std::string& why);
  /// Random weights made on the GPU (for benchmarks of large shapes; not the
  /// values seeded_weights() gives).
  static std::unique_ptr<cuda_forward> create_random(const llama_config& config, uint64_t seed,
                                                     const paged_kv_pool& pool, std::string& why);
  ~cuda_forward();

  void apply(const kv_copy& copy);
  /// One step; each sequence's last-position logits, on the host.
  std::vector<sequence_result> run(std::span<const sequence_input> batch);
  /// One step decoded greedily on the GPU: each sequence's largest logit (the
  /// lowest token id among equals, as sample_token) and its value. Only
  /// these cross PCIe, not a vocabulary of floats per sequence.
  struct greedy_token {
    uint32_t token = 0;
    float logit = 0;
  };
  std::vector<greedy_token> run_greedy(std::span<const sequence_input> batch);
  /// The same step, left in flight on the GPU (timing): synchronize() waits.
  void launch(std::span<const sequence_input> batch);
  void synchronize();
  /// The block mass of the last run, run_greedy or launch, per sequence in
  /// the batch's order (empty vectors for those that did not ask); waits for
  /// the step.
  struct sequence_mass {
    std::vector<float> block_mass, last_block_mass;
  };
  std::vector<sequence_mass> last_block_mass();
  /// Bytes of streamed blocks the last step copied into HBM (all layers).
  uint64_t last_staged_bytes() const;

  struct impl;

private:
  explicit cuda_forward(std::unique_ptr<impl> state);
  std::unique_ptr<impl> impl_;
};

} // namespace kvtier::model
