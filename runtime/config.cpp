#include "runtime/config.hpp"

#include "runtime/capacity_plan.hpp"
#include "runtime/model_presets.hpp"

#include <algorithm>
#include <limits>

namespace kvtier {
namespace {

uint32_t slots(uint64_t bytes, uint64_t per_block) {
  return static_cast<uint32_t>(std::min<uint64_t>(bytes / per_block, std::numeric_limits<uint32_t>::max() - 1));
}

} // namespace

kv_geometry default_geometry() {
  kv_geometry g;
  g.model = *find_model_preset("llama-3-8b");
  g.block_tokens = cache_config{}.block_tokens;
  return g;
}

uint64_t config::weight_bytes() const {
  return kvtier::weight_bytes(geometry.model.parameters, weights_dtype);
}

uint64_t config::hbm_kv_bytes() const {
  if (tiers.hbm.capacity_bytes)
    return *tiers.hbm.capacity_bytes;
  return hbm_kv_budget(hardware.gpu.hbm_bytes, weight_bytes(), hardware.gpu.reserved_bytes);
}

uint32_t config::hbm_blocks() const {
  return slots(hbm_kv_bytes(), geometry.bytes_per_block());
}

uint64_t config::offload_block_bytes() const {
  if (!compression.offload_dtype)
    return geometry.bytes_per_block();
  kv_geometry quantized = geometry;
  quantized.dtype = *compression.offload_dtype;
  return std::min(quantized.bytes_per_block(), geometry.bytes_per_block());
}

uint32_t config::dram_blocks() const {
  return tiers.dram.enabled ? slots(tiers.dram.capacity_bytes, offload_block_bytes()) : 0;
}

bool config::streams_from_dram() const {
  bool model_reads_quantized = compute.kind == compute_kind::model && compression.offload_dtype.has_value();
  return cache.stream_from_dram && dram_blocks() > 0 && !model_reads_quantized;
}

uint32_t config::stream_recent_blocks() const {
  return static_cast<uint32_t>((cache.stream_recent_tokens + cache.block_tokens - 1) / cache.block_tokens);
}

uint32_t config::nvme_blocks() const {
  return tiers.nvme.enabled ? slots(tiers.nvme.capacity_bytes, offload_block_bytes()) : 0;
}

uint32_t config::remote_blocks() const {
  bool used = remote.kind != remote_kind::none && backend == backend_kind::real;
  return used ? slots(cluster.remote_capacity_bytes, offload_block_bytes()) : 0;
}

uint32_t config::lowest_tier_blocks() const {
  return nvme_blocks() > 0 ? nvme_blocks() : remote_blocks();
}

} // namespace kvtier
