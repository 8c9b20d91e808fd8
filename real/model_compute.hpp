#pragma once
// A compute port that runs the Llama model of kernels/model over the HBM
// pool the copy engine owns: the CUDA twin when the copy engine's pool is on
// the GPU (and the build has CUDA), else the CPU twin over the pool in host
// memory. Each step, on the port's own thread: the
// plan's copy-on-write copies, then every sequence's forward over its block
// table (new K/V written into the slots the plan names), then one sampled
// token per sequence, sent as (sampled_atom, step_output) before the
// completion, whose `bytes` is the measured step time in nanoseconds.
//
// Steps run one at a time in submission order. The port never touches a slot
// outside the plan's block tables and copies; the block manager pins those.
// It keeps each sequence's block table between steps (compute_needs::
// keeps_tables): a step's table_from and entries update it, and the plan's
// retired sequences drop theirs, so a step's host work does not grow with the
// tables.
//
// K/V element type: [model] dtype fp16/bf16 gives bf16 slices; fp8 gives
// e4m3 slices (paged_kv.hpp) with per-pool scales k_scale = v_scale = 1.0,
// on the CPU twin only: the CUDA twin reads float8 in its decode kernel but
// has no prefill over it, so open() refuses fp8 over a GPU pool.

#include "actors/seam.hpp"
#include "kernels/model/forward_cpu.hpp"
#include "kernels/model/sampler.hpp"
#include "runtime/dtype.hpp"
#include "runtime/worker_queue.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <unordered_map>
#include <vector>

namespace kvtier {

class tier_copy_engine;

class model_compute_port final : public compute_port {
public:
  /// REQUIRES: the copy engine's HBM layout has the model's layers and K/V
  /// slices of `dtype` (fp16 or bf16: bf16 K/V; fp8: e4m3 K/V); errors say
  /// what is not so, or why the GPU twin cannot run over a pool on the GPU.
  static caf::expected<std::unique_ptr<model_compute_port>> open(model::llama_weights weights, tier_copy_engine& copies,
                                                                 uint32_t block_tokens, model::sampling how,
                                                                 kv_dtype dtype = kv_dtype::bf16);
  ~model_compute_port() override;

  void execute(step_plan plan, caf::actor notify, uint64_t tag) override;
  compute_needs needs() const override { return {true, weights_.config.vocab, true}; }
  /// Runs `plan` on the calling thread as execute() would (tables, copies,
  /// forward, sampling) and returns the sampled tokens; for calibration, where
  /// no actor waits. REQUIRES: no execute() in flight.
  step_output run_now(const step_plan& plan);
  std::string kind() const override;

  /// The twin that computes (model_compute.cpp): CPU or CUDA.
  struct twin;

private:
  struct job {
    step_plan plan;
    caf::actor notify;
    uint64_t tag;
  };
  model_compute_port(model::llama_weights weights, model::sampling how);
  void run(job& next);

  model::llama_weights weights_;
  std::unique_ptr<twin> forward_; // set by open(), before any step
  model::sampling how_;
  // Each sequence's block table as its steps left it; only the step thread
  // (or run_now's caller) touches it.
  std::unordered_map<uint64_t, std::vector<uint32_t>> tables_;
  worker_queue<job> steps_; // last: its thread starts once the members above exist; destruction drains it
};

} // namespace kvtier
