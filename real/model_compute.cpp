#include "real/model_compute.hpp"

#include "real/copy_engine.hpp"
#if KVTIER_HAVE_CUDA_MODEL
#include "kernels/model/cuda/cuda_forward.hpp"
#endif
#include "runtime/check.hpp"
#include "runtime/error.hpp"

#include <caf/send.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kvtier {

struct model_compute_port::twin {
  struct picked {
    uint32_t token = 0;
    float logit = 0;
    std::vector<float> block_mass, last_block_mass;
  };
  virtual ~twin() = default;
  virtual std::string name() const = 0;
  virtual void apply(const model::kv_copy& copy) = 0;
  virtual std::vector<model::sequence_result> run(std::span<const model::sequence_input> batch) = 0;
  /// The step and each sequence's next token: `positions[i]` is the position
  /// sequence `ids[i]` samples at.
  virtual std::vector<picked> step(std::span<const model::sequence_input> batch, const model::sampling& how,
                                   std::span<const uint64_t> ids, std::span<const uint64_t> positions) {
    auto results = run(batch);
    std::vector<picked> out(results.size());
    for (size_t i = 0; i < results.size(); ++i) {
      out[i].token = model::sample_token(results[i].logits, how, ids[i], positions[i]);
      out[i].logit = results[i].logits[out[i].token];
      out[i].block_mass = std::move(results[i].block_mass);
      out[i].last_block_mass = std::move(results[i].last_block_mass);
    }
    return out;
  }
};

namespace {

class cpu_twin final : public model_compute_port::twin {
public:
  cpu_twin(const model::llama_weights& weights, const model::paged_kv_pool& pool) : forward_(weights, pool) {}
  std::string name() const override { return "model (cpu)"; }
  void apply(const model::kv_copy& copy) override { forward_.apply(copy); }
  std::vector<model::sequence_result> run(std::span<const model::sequence_input> batch) override {
    std::vector<model::sequence_result> out;
    out.reserve(batch.size());
    for (const auto& in : batch)
      out.push_back(forward_.run(in));
    return out;
  }

private:
  model::cpu_forward forward_;
};

#if KVTIER_HAVE_CUDA_MODEL
class cuda_twin final : public model_compute_port::twin {
public:
  explicit cuda_twin(std::unique_ptr<model::cuda_forward> forward) : forward_(std::move(forward)) {}
  std::string name() const override { return "model (cuda)"; }
  void apply(const model::kv_copy& copy) override { forward_->apply(copy); }
  std::vector<model::sequence_result> run(std::span<const model::sequence_input> batch) override {
    return forward_->run(batch);
  }
  // Greedy decoding stays on the GPU: a vocabulary of logits per sequence
  // (65 MB at batch 128 for Llama-3) would otherwise cross PCIe every step.
  std::vector<picked> step(std::span<const model::sequence_input> batch, const model::sampling& how,
                           std::span<const uint64_t> ids, std::span<const uint64_t> positions) override {
    if (how.temperature > 0)
      return twin::step(batch, how, ids, positions);
    std::vector<picked> out;
    out.reserve(batch.size());
    for (const auto& g : forward_->run_greedy(batch))
      out.push_back({g.token, g.logit, {}, {}});
    // Block mass only crosses on the steps that asked (a decode step rarely does).
    if (std::none_of(batch.begin(), batch.end(), [](const auto& in) { return in.want_block_mass; }))
      return out;
    auto masses = forward_->last_block_mass();
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].block_mass = std::move(masses[i].block_mass);
      out[i].last_block_mass = std::move(masses[i].last_block_mass);
    }
    return out;
  }

private:
  std::unique_ptr<model::cuda_forward> forward_;
};
#endif

} // namespace

caf::expected<std::unique_ptr<model_compute_port>> model_compute_port::open(model::llama_weights weights,
                                                                            tier_copy_engine& copies,
                                                                            uint32_t block_tokens, model::sampling how,
                                                                            kv_dtype dtype) {
  if (auto problem = weights.shape_problem(); !problem.empty())
    return make_error(errc::invalid_config, "the model's weights do not match its shape: " + problem);
  if (dtype != kv_dtype::fp16 && dtype != kv_dtype::bf16 && dtype != kv_dtype::fp8)
    return make_error(errc::invalid_config,
                      fmt::format("[model] dtype = \"{}\": the model keeps K/V in bf16 or fp8 (e4m3); expected fp16, "
                                  "bf16 or fp8",
                                  name_of(dtype)));
  const bool fp8 = dtype == kv_dtype::fp8;
  if (fp8 && copies.on_gpu())
    return make_error(errc::unsupported,
                      "[model] dtype = \"fp8\": float8 KV on the GPU is read by the decode kernel only; prefill over "
                      "float8 is not built: use dtype bf16, or --device cpu");
  model::paged_kv_pool pool;
  pool.base = static_cast<std::byte*>(copies.hbm_base());
  pool.layout = copies.layout(tier::hbm);
  pool.kv_heads = weights.config.kv_heads;
  pool.head_dim = weights.config.head_dim;
  pool.block_tokens = block_tokens;
  // Per-pool scales of 1: e4m3 holds +-448 at 3 mantissa bits, which covers
  // K/V magnitudes without calibration; values beyond saturate.
  pool.kv_fp8 = fp8;
  pool.k_scale = 1.0f;
  pool.v_scale = 1.0f;
  // Streamed blocks (sequences larger than HBM) are read from the DRAM pool.
  static_assert(model::paged_kv_pool::dram_bit == streamed_slot_bit);
  if (copies.dram_base() != nullptr) {
    pool.dram_base = copies.dram_base();
    pool.dram_layout = copies.layout(tier::dram);
  }
  if (!pool.consistent() || pool.layout.layers != weights.config.layers)
    return make_error(
        errc::invalid_config,
        fmt::format("the HBM pool ({} layers of {} bytes per block) is not the model's ({} layers of "
                    "{} bytes of {} K and V): [model] must describe the model's shape",
                    pool.layout.layers, pool.layout.layer_bytes, weights.config.layers,
                    model::paged_kv_pool::layer_bytes_for(pool.kv_heads, pool.head_dim, block_tokens, fp8),
                    fp8 ? "e4m3" : "bf16"));
  // The port owns the weights first: the CPU twin reads them in place.
  std::unique_ptr<model_compute_port> port(new model_compute_port(std::move(weights), how));
  if (copies.on_gpu()) {
#if KVTIER_HAVE_CUDA_MODEL
    std::string why;
    auto gpu = model::cuda_forward::create(port->weights_, pool, why);
    if (!gpu)
      return make_error(errc::unsupported, "the model's CUDA twin cannot run over the GPU pool: " + why);
    port->forward_ = std::make_unique<cuda_twin>(std::move(gpu));
#else
    return make_error(errc::unsupported,
                      "[compute] kind = \"model\": this build has no CUDA twin of the model, and the copy engine "
                      "keeps the HBM pool on the GPU; run with --device cpu for the CPU twin");
#endif
  } else {
    port->forward_ = std::make_unique<cpu_twin>(port->weights_, pool);
  }
  return port;
}

model_compute_port::model_compute_port(model::llama_weights weights, model::sampling how)
    : weights_(std::move(weights)), how_(how), steps_(1, [this](job& next) { run(next); }) {
}

model_compute_port::~model_compute_port() = default;

std::string model_compute_port::kind() const {
  return forward_->name();
}

void model_compute_port::execute(step_plan plan, caf::actor notify, uint64_t tag) {
  bool queued = steps_.push({std::move(plan), std::move(notify), tag});
  KVTIER_CHECK(queued, "a step executed on a compute port that is being destroyed");
}

step_output model_compute_port::run_now(const step_plan& plan) {
  for (auto id : plan.retired)
    tables_.erase(id);
  std::vector<model::sequence_input> batch;
  batch.reserve(plan.sequences.size());
  for (const auto& s : plan.sequences) {
    // The entries the port holds up to table_from, then the step's.
    auto& table = tables_[s.sequence_id];
    KVTIER_CHECK(s.table_from <= table.size(), "model_compute_port: a step's table starts past the table held");
    table.resize(s.table_from);
    table.insert(table.end(), s.block_table.begin(), s.block_table.end());
    model::sequence_input in;
    in.tokens = s.tokens;
    in.first_position = s.first_position;
    in.context_tokens = s.context_tokens;
    in.block_table = table; // a map's values stay where they are while others are added
    in.dropped_tokens = s.dropped_tokens;
    in.want_block_mass = s.want_attention_stats;
    in.mass_queries = s.attention_queries;
    batch.push_back(in);
  }
  for (const auto& c : plan.copies)
    forward_->apply({c.from_slot, c.to_slot, c.tokens});
  std::vector<uint64_t> ids, positions;
  for (const auto& s : plan.sequences) {
    ids.push_back(s.sequence_id);
    positions.push_back(s.first_position + s.tokens.size() - 1);
  }
  auto picked = forward_->step(batch, how_, ids, positions);
  step_output out;
  out.step_id = plan.step_id;
  out.sequences.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i)
    out.sequences.push_back({ids[i], picked[i].token, picked[i].logit, std::move(picked[i].block_mass),
                             std::move(picked[i].last_block_mass)});
  return out;
}

void model_compute_port::run(job& next) {
  auto start = std::chrono::steady_clock::now();
  auto out = run_now(next.plan);
  auto took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  caf::anon_send(next.notify, sampled_atom::value, std::move(out));
  caf::anon_send(next.notify, completion_atom::value, next.tag, static_cast<uint64_t>(std::llround(took * 1e9)),
                 caf::error{});
}

} // namespace kvtier
