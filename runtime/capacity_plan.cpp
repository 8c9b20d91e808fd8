#include "runtime/capacity_plan.hpp"

#include <cmath>

namespace kvtier {

capacity_plan plan_capacity(const capacity_query& q) {
  capacity_plan p;
  p.bytes_per_token = q.geometry.bytes_per_token();
  p.bytes_per_block = q.geometry.bytes_per_block();
  p.blocks_per_request = q.geometry.blocks_for(q.context_tokens);
  p.bytes_per_request = p.blocks_per_request * p.bytes_per_block;
  p.weight_bytes = static_cast<uint64_t>(
    std::llround(static_cast<double>(q.geometry.model.parameters) * q.weight_bytes_per_parameter));
  uint64_t used = p.weight_bytes + q.reserved_bytes;
  p.kv_budget_bytes = q.hbm_bytes > used ? q.hbm_bytes - used : 0;
  uint64_t blocks = p.bytes_per_block ? p.kv_budget_bytes / p.bytes_per_block : 0;
  p.tokens_that_fit = blocks * q.geometry.block_tokens;
  p.requests_that_fit = p.blocks_per_request ? blocks / p.blocks_per_request : 0;
  return p;
}

} // namespace kvtier
