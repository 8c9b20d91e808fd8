#include "runtime/cost_model.hpp"

#include "runtime/compute_fit.hpp"

#include <algorithm>

namespace kvtier {

cost_model::cost_model(const config& cfg)
    : geometry_(cfg.geometry),
      hardware_(cfg.hardware),
      weight_bytes_(static_cast<double>(cfg.weight_bytes())),
      calibrated_(cfg.hardware.compute.present() && cfg.hardware.compute.model == cfg.geometry.model.name) {
}

std::string cost_model::compute_model() const {
  return calibrated_ ? "measured forward (" + hardware_.compute.model + ")" : "roofline";
}

double cost_model::step_seconds(const step_shape& s) const {
  const auto& m = geometry_.model;
  if (calibrated_) {
    compute_sample step;
    step.new_tokens = s.new_tokens;
    step.decode_only = s.decode_only();
    step.kv_bytes = static_cast<double>(geometry_.bytes_per_token()) * static_cast<double>(s.decode_kv_tokens);
    step.attention_flops = 4.0 * m.layers * m.query_heads * m.head_dim * s.chunk_attention_pairs;
    return predict_seconds(hardware_.compute, step);
  }
  const auto& gpu = hardware_.gpu;
  double flops = 2.0 * static_cast<double>(m.parameters) * static_cast<double>(s.new_tokens) +
      4.0 * m.layers * m.query_heads * m.head_dim * s.attention_pairs;
  double bytes = weight_bytes_ +
      static_cast<double>(geometry_.bytes_per_token()) * static_cast<double>(s.kv_read_tokens + s.new_tokens);
  double compute = flops / (gpu.bf16_tflops * 1e12 * gpu.compute_efficiency);
  double memory = bytes / (gpu.hbm_gbps * 1e9 * gpu.memory_efficiency);
  return gpu.step_overhead_us * 1e-6 + std::max(compute, memory);
}

double cost_model::prefill_seconds(uint64_t tokens, uint64_t context, uint32_t chunk) const {
  double total = 0;
  for (uint64_t done = 0; done < tokens; done += chunk) {
    step_shape shape;
    shape.add(std::min<uint64_t>(chunk, tokens - done), context + done);
    total += step_seconds(shape);
  }
  return total;
}

double cost_model::link_seconds(const link_profile& link, uint64_t bytes, uint64_t operations) {
  return link.latency_us * 1e-6 + static_cast<double>(operations) * link.per_op_us * 1e-6 +
      static_cast<double>(bytes) / (link.gbps * 1e9);
}

} // namespace kvtier
