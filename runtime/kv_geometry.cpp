#include "runtime/kv_geometry.hpp"

namespace kvtier {

uint64_t kv_geometry::bytes_per_token_layer() const {
  uint64_t elements = uint64_t{model.kv_heads} * model.head_dim;
  return 2 * stored_bytes(dtype, elements, model.head_dim);
}

uint64_t kv_geometry::bytes_per_token() const {
  return bytes_per_token_layer() * model.layers;
}

uint64_t kv_geometry::bytes_per_block() const {
  return bytes_per_token() * block_tokens;
}

uint64_t kv_geometry::bytes_per_block_layer() const {
  return bytes_per_token_layer() * block_tokens;
}

uint64_t kv_geometry::blocks_for(uint64_t tokens) const {
  return (tokens + block_tokens - 1) / block_tokens;
}

uint64_t kv_geometry::bytes_for_context(uint64_t tokens) const {
  return blocks_for(tokens) * bytes_per_block();
}

} // namespace kvtier
