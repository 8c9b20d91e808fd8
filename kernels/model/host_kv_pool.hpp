#pragma once
// A layer-major KV pool in host memory that owns its bytes: what the CPU twin
// runs over outside `kvtier run` (tests, the quality harness). Zeroed at
// construction; `view` points into `bytes`, so the pool is neither copied nor
// moved (a moved vector would leave the view behind).

#include "kernels/model/llama_config.hpp"
#include "kernels/model/paged_kv.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier::model {

struct host_kv_pool {
  std::vector<std::byte> bytes;
  paged_kv_pool view;

  host_kv_pool(const llama_config& c, uint32_t slots, uint32_t block_tokens, bool fp8 = false) {
    view.kv_heads = c.kv_heads;
    view.head_dim = c.head_dim;
    view.block_tokens = block_tokens;
    view.kv_fp8 = fp8;
    view.layout = {slot_order::layer_major, slots, c.layers,
                   paged_kv_pool::layer_bytes_for(c.kv_heads, c.head_dim, block_tokens, fp8)};
    bytes.assign(view.layout.total_bytes(), std::byte{0});
    view.base = bytes.data();
  }
  host_kv_pool(const host_kv_pool&) = delete;
  host_kv_pool& operator=(const host_kv_pool&) = delete;
};

} // namespace kvtier::model
