#pragma once
// The memory math behind `kvtier calc` and behind every config's HBM tier:
// what the weights take, what HBM is left for KV, what one request's KV
// costs and how many such requests fit. config::hbm_kv_bytes() and
// `kvtier calc` both go through hbm_kv_budget(), so they cannot disagree.

#include "runtime/dtype.hpp"
#include "runtime/kv_geometry.hpp"

#include <cstdint>

namespace kvtier {

/// Bytes per weight: 2 for fp16/bf16, 1 for fp8/int8, 0.5 for int4.
double weight_bytes_per_parameter(kv_dtype weights_dtype);
/// Bytes of a model's weights, rounded to the nearest byte.
uint64_t weight_bytes(uint64_t parameters, kv_dtype weights_dtype);
/// HBM left for KV once weights and reserve are placed; 0 when they do not fit.
uint64_t hbm_kv_budget(uint64_t hbm_bytes, uint64_t weight_bytes, uint64_t reserved_bytes);

struct capacity_query {
  kv_geometry geometry;
  uint64_t context_tokens = 0;
  uint64_t hbm_bytes = 0; // the GPU's memory
  kv_dtype weights_dtype = kv_dtype::bf16;
  uint64_t reserved_bytes = 0; // activations and runtime, kept off the KV budget
};

struct capacity_plan {
  uint64_t bytes_per_token = 0;
  uint64_t bytes_per_block = 0;
  uint64_t blocks_per_request = 0;
  uint64_t bytes_per_request = 0; // whole blocks
  uint64_t weight_bytes = 0;
  uint64_t kv_budget_bytes = 0; // hbm - weights - reserve (0 if negative)
  uint64_t requests_that_fit = 0;
  uint64_t tokens_that_fit = 0; // KV budget in tokens, whole blocks
};

/// REQUIRES: the query's geometry is valid and its context is at most
/// max_context_tokens (so no product below overflows 64 bits).
capacity_plan plan_capacity(const capacity_query& query);

/// The largest context plan_capacity takes: 2^32 tokens (4G, far beyond any model).
inline constexpr uint64_t max_context_tokens = uint64_t{1} << 32;

} // namespace kvtier
