#include "real/copy_engine.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/cpu_mover.hpp"
#include "kernels/copy/cuda_mover.hpp"
#include "runtime/error.hpp"
#include "runtime/units.hpp"

#include <caf/send.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace kvtier {
namespace {

link_counters to_counters(const copy::link_stats& s) {
  return {s.bytes,    s.operations,    s.busy_seconds,      s.logical_bytes,  s.link_seconds,
          s.requests, s.issue_seconds, s.start_lag_seconds, s.end_lag_seconds};
}

link_counters since(const link_counters& now, const link_counters& start) {
  return {now.bytes - start.bytes,
          now.operations - start.operations,
          now.busy_seconds - start.busy_seconds,
          now.kv_bytes - start.kv_bytes,
          now.link_seconds - start.link_seconds,
          now.requests - start.requests,
          now.issue_seconds - start.issue_seconds,
          now.start_lag_seconds - start.start_lag_seconds,
          now.end_lag_seconds - start.end_lag_seconds};
}

copy::move_request to_request(copy_job&& job) {
  copy::move_request r;
  r.from = job.from;
  r.to = job.to;
  r.tag = job.tag;
  r.moves.reserve(job.moves.size());
  for (const auto& m : job.moves)
    r.moves.push_back({m.from_slot, m.to_slot});
  return r;
}

} // namespace

tier_copy_engine::tier_copy_engine(std::unique_ptr<copy::tier_mover> mover, std::string fallback_reason)
    : mover_(std::move(mover)),
      fallback_reason_(std::move(fallback_reason)),
      h2d_at_start_(to_counters(mover_->stats(tier::dram, tier::hbm))),
      d2h_at_start_(to_counters(mover_->stats(tier::hbm, tier::dram))),
      h2d_stats_at_start_(mover_->stats(tier::dram, tier::hbm)),
      d2h_stats_at_start_(mover_->stats(tier::hbm, tier::dram)) {
}

std::string tier_copy_engine::paths_summary() const {
  std::string out;
  auto direction = [&](const char* name, const copy::link_stats& now, const copy::link_stats& start,
                       const link_counters& since) {
    std::string parts;
    for (size_t p = 0; p < copy::link_stats::paths; ++p) {
      const uint64_t requests = now.requests_by_path[p] - start.requests_by_path[p];
      if (requests == 0)
        continue;
      const uint64_t bytes = now.bytes_by_path[p] - start.bytes_by_path[p];
      const double seconds = now.link_seconds_by_path[p] - start.link_seconds_by_path[p];
      parts += fmt::format("{}{} {} requests, {}, {:.1f} GB/s on the link", parts.empty() ? "" : "; ",
                           copy::to_string(static_cast<copy::copy_path>(p)), requests, format_bytes(bytes),
                           seconds > 0 ? double(bytes) / seconds / 1e9 : 0.0);
    }
    const double host_seconds = since.issue_seconds + since.start_lag_seconds + since.end_lag_seconds;
    if (since.requests > 0 && host_seconds > 0) {
      auto per_request_ms = [&](double total) { return total / double(since.requests) * 1e3; };
      parts += fmt::format(" (host per request: issuing {:.2f} ms, pickup to the GPU starting {:.2f} ms, GPU done to "
                           "seen done {:.2f} ms)",
                           per_request_ms(since.issue_seconds), per_request_ms(since.start_lag_seconds),
                           per_request_ms(since.end_lag_seconds));
    }
    if (!parts.empty())
      out += fmt::format("{}{}: {}", out.empty() ? "" : "; ", name, parts);
  };
  direction("host->device", mover_->stats(tier::dram, tier::hbm), h2d_stats_at_start_, h2d_counters());
  direction("device->host", mover_->stats(tier::hbm, tier::dram), d2h_stats_at_start_, d2h_counters());
  return out;
}

void tier_copy_engine::submit(copy_job job, caf::actor notify) {
  bool beside_compute = job.background;
  submit_layers(std::move(job), 0, 0, std::move(notify), beside_compute);
}

void tier_copy_engine::submit_layers(copy_job job, uint32_t first_layer, uint32_t layer_count, caf::actor notify,
                                     bool spare_sms) {
  auto r = to_request(std::move(job));
  r.first_layer = first_layer;
  r.layer_count = layer_count;
  r.spare_sms = spare_sms;
  mover_->submit(std::move(r), [notify = std::move(notify)](const copy::move_result& res) {
    caf::error status =
        res.ok ? caf::error{} : make_error(errc::io_failure, "copy between HBM and DRAM failed: " + res.error);
    caf::anon_send(notify, completion_atom::value, res.tag, res.bytes, std::move(status));
  });
}

link_counters tier_copy_engine::h2d_counters() const {
  return since(to_counters(mover_->stats(tier::dram, tier::hbm)), h2d_at_start_);
}
link_counters tier_copy_engine::d2h_counters() const {
  return since(to_counters(mover_->stats(tier::hbm, tier::dram)), d2h_at_start_);
}

uint64_t tier_copy_engine::slot_checksum(tier t, uint32_t slot) {
  std::vector<std::byte> bytes(layout(t).block_bytes());
  read_slot(t, slot, bytes);
  return copy::block_checksum(bytes);
}

std::unique_ptr<tier_copy_engine> make_copy_engine(const copy_engine_options& options) {
  copy::mover_options mo = options.tuning;
  mo.shape = options.shape;
  mo.device = options.gpu;
  if (options.profile != nullptr && !mo.costs && !mo.calibrate)
    mo.costs = copy::costs_from_profile(options.profile->pcie);
  auto say = [&](const std::string& text) {
    if (options.log)
      options.log(text);
    else
      std::fprintf(stderr, "kvtier: %s\n", text.c_str());
  };
  std::string why;
  const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (const uint32_t most = copy::dma_streams_beside_compute(queues); options.device != "cpu" && mo.dma_streams > most)
    say(fmt::format("[copy] dma_streams = {} with CUDA_DEVICE_MAX_CONNECTIONS {}: copy streams may share a hardware "
                    "queue with the model's stream and wait for its kernels (on the H200, 4 streams under 8 queues "
                    "moved demotions at 7.9 GB/s, 1 stream at 43.4); use at most {}, or set "
                    "CUDA_DEVICE_MAX_CONNECTIONS=32",
                    mo.dma_streams, queues ? "below 32" : "unset (8 queues)", most));
  if (options.device != "cpu") {
    if (auto gpu = copy::make_cuda_mover(mo, &why))
      return std::make_unique<tier_copy_engine>(std::move(gpu), std::string{});
    say((options.device == "cuda" ? "asked for the GPU copy engine, but " : "") + why +
        "; moving KV blocks with the CPU twin (host memcpy) instead");
  }
  return std::make_unique<tier_copy_engine>(copy::make_cpu_mover(mo), why);
}

} // namespace kvtier
