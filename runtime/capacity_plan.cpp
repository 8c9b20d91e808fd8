#include "runtime/capacity_plan.hpp"

#include <cmath>

namespace kvtier {

double weight_bytes_per_parameter(kv_dtype weights_dtype) {
  switch (weights_dtype) {
    case kv_dtype::fp16:
    case kv_dtype::bf16:
      return 2.0;
    case kv_dtype::fp8:
    case kv_dtype::int8:
      return 1.0;
    case kv_dtype::int4:
    case kv_dtype::int4_row:
      return 0.5;
  }
  return 2.0;
}

uint64_t weight_bytes(uint64_t parameters, kv_dtype weights_dtype) {
  return static_cast<uint64_t>(
      std::llround(static_cast<double>(parameters) * weight_bytes_per_parameter(weights_dtype)));
}

uint64_t hbm_kv_budget(uint64_t hbm_bytes, uint64_t weights, uint64_t reserved_bytes) {
  uint64_t used = weights + reserved_bytes;
  return hbm_bytes > used ? hbm_bytes - used : 0;
}

capacity_plan plan_capacity(const capacity_query& q) {
  capacity_plan p;
  p.bytes_per_token = q.geometry.bytes_per_token();
  p.bytes_per_block = q.geometry.bytes_per_block();
  p.blocks_per_request = q.geometry.blocks_for(q.context_tokens);
  p.bytes_per_request = p.blocks_per_request * p.bytes_per_block;
  p.weight_bytes = weight_bytes(q.geometry.model.parameters, q.weights_dtype);
  p.kv_budget_bytes = hbm_kv_budget(q.hbm_bytes, p.weight_bytes, q.reserved_bytes);
  uint64_t blocks = p.bytes_per_block ? p.kv_budget_bytes / p.bytes_per_block : 0;
  p.tokens_that_fit = blocks * q.geometry.block_tokens;
  p.requests_that_fit = p.blocks_per_request ? blocks / p.blocks_per_request : 0;
  return p;
}

} // namespace kvtier
