#include "real/real_system.hpp"

#include "io/nvme_options.hpp"
#include "kernels/quant/offload_codec.hpp"
#include "real/copy_engine.hpp"
#include "real/host_compute.hpp"
#include "real/model_compute.hpp"
#include "real/model_shape.hpp"
#include "real/nvme_page_store.hpp"
#if KVTIER_HAVE_REMOTE
#include "real/remote_page_store.hpp"
#endif
#include "runtime/error.hpp"
#include "runtime/units.hpp"

#include <caf/all.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

namespace kvtier {

namespace {

// Quantize-on-offload: the per-row format of [compression] offload_dtype.
caf::expected<quant::offload_codec> offload_codec_for(const config& cfg) {
  auto dtype = *cfg.compression.offload_dtype;
  auto format = dtype == kv_dtype::fp8 ? quant::scheme::fp8_token
      : dtype == kv_dtype::int8        ? quant::scheme::int8_token
      : dtype == kv_dtype::int4_row    ? quant::scheme::int4_row
                                       : quant::scheme::int4_token;
  auto element = cfg.geometry.dtype == kv_dtype::bf16 ? quant::element_type::bf16 : quant::element_type::fp16;
  const auto& m = cfg.geometry.model;
  std::string why;
  auto codec = quant::make_offload_codec(format, element, m.kv_heads, cfg.geometry.block_tokens, m.head_dim, &why);
  if (!codec)
    return make_error(errc::invalid_config,
                      fmt::format("{}: [compression] offload_dtype = \"{}\": {}", cfg.source, name_of(dtype), why));
  return *codec;
}

} // namespace

struct real_backend::impl {
  std::unique_ptr<tier_copy_engine> copies;
  std::unique_ptr<page_store> pages; // the NVMe tier, or the remote tier in its place
  std::unique_ptr<compute_port> own_compute;
  compute_port* compute = nullptr;
};

real_backend::real_backend() : impl_(std::make_unique<impl>()) {
}
real_backend::~real_backend() = default;

caf::expected<std::unique_ptr<real_backend>> real_backend::open(const config& cfg, const real_backend_options& o) {
  std::unique_ptr<real_backend> b{new real_backend()};
  copy_engine_options co;
  co.shape = {cfg.hbm_blocks(), std::max<uint32_t>(1, cfg.dram_blocks()), cfg.geometry.model.layers,
              cfg.geometry.bytes_per_block_layer()};
  if (cfg.compression.offload_dtype) {
    auto codec = offload_codec_for(cfg);
    if (!codec)
      return std::move(codec.error());
    co.shape.codec = *codec;
  }
  co.device = o.device;
  co.profile = &cfg.hardware;
  co.tuning.allow_sm_copy = cfg.copy.kernels == copy_kernel_use::on_demand;
  co.tuning.calibrate = cfg.copy.calibrate;
  co.tuning.dma_streams = cfg.copy.dma_streams;
  co.tuning.compute_shares_gpu = cfg.compute.kind == compute_kind::model;
  // The CPU twin keeps "HBM" in host memory too: both pools must fit this machine.
  uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  uint64_t host_bytes = uint64_t{co.shape.dram_slots} * co.shape.dram_block_bytes();
  uint64_t hbm_bytes = uint64_t{co.shape.hbm_slots} * co.shape.block_bytes();
  if (o.device == "cpu" && host_bytes + hbm_bytes > physical)
    return make_error(errc::no_capacity,
                      fmt::format("{}: the CPU twin needs {} of host memory for HBM ({}) and DRAM ({}) but the machine "
                                  "has {}; lower [tiers.hbm] and [tiers.dram] capacity",
                                  cfg.source, format_bytes(host_bytes + hbm_bytes), format_bytes(hbm_bytes),
                                  format_bytes(host_bytes), format_bytes(physical)));
  b->impl_->copies = make_copy_engine(co);
  if (cfg.nvme_blocks() > 0 && cfg.dram_blocks() > 0) {
    auto nvme = io::make_nvme_options(cfg.tiers.nvme_io, cfg.tiers.nvme_path);
    // kv_dtype's fixed enumerators (fp8 2, int8 3, int4 4, int4_row 5) name the payload's format on disk.
    nvme.payload_encoding = cfg.compression.offload_dtype ? static_cast<uint32_t>(*cfg.compression.offload_dtype) : 0;
    io::dram_region region{b->impl_->copies->dram_base(), b->impl_->copies->layout(tier::dram)};
    auto pages = nvme_page_store::open(nvme, cfg.nvme_blocks(), region);
    if (!pages)
      return std::move(pages.error());
    b->impl_->pages = std::move(*pages);
  } else if (cfg.remote_blocks() > 0 && cfg.dram_blocks() > 0) {
#if KVTIER_HAVE_REMOTE
    io::dram_region region{b->impl_->copies->dram_base(), b->impl_->copies->layout(tier::dram)};
    const auto encoding = cfg.compression.offload_dtype ? static_cast<uint8_t>(*cfg.compression.offload_dtype) : 0;
    auto pages = remote_page_store::open(cfg.remote, cfg.remote_blocks(), region, encoding);
    if (!pages)
      return make_error(errc::io_failure, fmt::format("{}: [remote]: {}", cfg.source, describe(pages.error())));
    b->impl_->pages = std::move(*pages);
#else
    return make_error(errc::invalid_config,
                      fmt::format("{}: [remote] kind = \"redis\": this kvtier was built without hiredis "
                                  "(libhiredis-dev); install it and rebuild, or remove [remote]",
                                  cfg.source));
#endif
  }
  if (o.compute) {
    b->impl_->compute = o.compute;
  } else if (cfg.compute.kind == compute_kind::model) {
    auto weights = model_weights_for(cfg);
    if (!weights)
      return std::move(weights.error());
    auto port = model_compute_port::open(std::move(*weights), *b->impl_->copies, cfg.cache.block_tokens,
                                         {cfg.compute.temperature, cfg.compute.sampling_seed}, cfg.geometry.dtype);
    if (!port)
      return std::move(port.error());
    b->impl_->own_compute = std::move(*port);
    b->impl_->compute = b->impl_->own_compute.get();
  } else {
    b->impl_->own_compute = std::make_unique<host_compute_port>(cfg, o.compute_time_scale);
    b->impl_->compute = b->impl_->own_compute.get();
  }
  return b;
}

std::string real_backend::name() const {
  const char* pages = !impl_->pages                        ? ""
      : dynamic_cast<nvme_page_store*>(impl_->pages.get()) ? ", NVMe page store"
                                                           : ", remote page store";
  return fmt::format("real ({}{})", impl_->copies->name(), pages);
}
copy_engine& real_backend::copies() {
  return *impl_->copies;
}
page_store* real_backend::pages() {
  return impl_->pages.get();
}
compute_port& real_backend::compute() {
  return *impl_->compute;
}
tier_copy_engine& real_backend::copy_engine_impl() {
  return *impl_->copies;
}

caf::expected<run_result> run_real(const config& cfg, std::vector<real_run_request> requests,
                                   const real_run_options& options) {
  auto backend = real_backend::open(cfg, options.backend);
  if (!backend)
    return std::move(backend.error());
  // What the slot file held, what was damaged and why, or why it was formatted.
  if (auto* store = dynamic_cast<nvme_page_store*>((*backend)->pages()))
    fmt::print(stderr, "kvtier run: {}\n", store->report().message());
#if KVTIER_HAVE_REMOTE
  if (auto* remote = dynamic_cast<remote_page_store*>((*backend)->pages()))
    fmt::print(stderr, "kvtier run: remote tier on {}: {} blocks already stored there\n", remote->where(),
               remote->recovered_blocks().size());
#endif
  run_result result;
  result.requests_total = requests.size();
  result.metrics.record_steps = options.record_steps;
  result.compute = (*backend)->compute().kind();
  auto wall_start = std::chrono::steady_clock::now();
  {
    caf::actor_system_config sys_cfg;
    sys_cfg.set("logger.verbosity", caf::atom("quiet"));
    caf::actor_system system{sys_cfg};
    run_driver driver(system, cfg, result);
    auto& ctx = driver.context();
    driver.start(**backend);
    driver.schedule_arrivals(std::move(requests), options.arrival_time_scale);
    auto next_report = std::chrono::steady_clock::now();
    // Settled requests may leave demotions in flight: wait for those too, a while.
    constexpr auto drain_limit = std::chrono::seconds(30);
    std::optional<std::chrono::steady_clock::time_point> settled_at;
    while (ctx.settled.load() < result.requests_total || ctx.moving.load() > 0) {
      if (ctx.settled.load() >= result.requests_total) {
        if (!settled_at)
          settled_at = std::chrono::steady_clock::now();
        else if (std::chrono::steady_clock::now() - *settled_at > drain_limit) {
          fmt::print(stderr, "kvtier run: {} transfer batches still in flight {} s after the last request; stopping\n",
                     ctx.moving.load(), drain_limit.count());
          break;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (options.progress && std::chrono::steady_clock::now() >= next_report) {
        next_report += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::duration<double>(options.progress_every_s));
        options.progress(std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count(),
                         ctx.settled.load(), result.requests_total);
      }
    }
    driver.stop();
    system.await_all_actors_done();
    (*backend)->copy_engine_impl().drain();
    driver.collect_links();
  }
  if (auto paths = (*backend)->copy_engine_impl().paths_summary(); !paths.empty())
    fmt::print(stderr, "kvtier run: copy paths: {}\n", paths);
#if KVTIER_HAVE_REMOTE
  if (auto* remote = dynamic_cast<remote_page_store*>((*backend)->pages())) {
    auto f = remote->faults();
    result.remote = {true,           remote->where(), f.missing_reads,         f.corrupted_reads,
                     f.failed_reads, f.failed_writes, f.foreign_encoding_reads};
  }
#endif
  result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  result.simulated_seconds = result.wall_seconds;
  return result;
}

} // namespace kvtier
