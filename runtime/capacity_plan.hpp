#pragma once
// The memory math behind `kvtier calc`: what one request's KV costs and how
// many such requests fit in a GPU after the weights.

#include "runtime/kv_geometry.hpp"

#include <cstdint>

namespace kvtier {

struct capacity_query {
  kv_geometry geometry;
  uint64_t context_tokens = 0;
  uint64_t hbm_bytes = 0;       // the GPU's memory
  double weight_bytes_per_parameter = 2.0;
  uint64_t reserved_bytes = 0;  // activations and runtime, kept off the KV budget
};

struct capacity_plan {
  uint64_t bytes_per_token = 0;
  uint64_t bytes_per_block = 0;
  uint64_t blocks_per_request = 0;
  uint64_t bytes_per_request = 0;     // whole blocks
  uint64_t weight_bytes = 0;
  uint64_t kv_budget_bytes = 0;       // hbm - weights - reserve (0 if negative)
  uint64_t requests_that_fit = 0;
  uint64_t tokens_that_fit = 0;       // KV budget in tokens, whole blocks
};

capacity_plan plan_capacity(const capacity_query& query);

} // namespace kvtier
