#include "sim/configured_run.hpp"

#include "runtime/config_names.hpp"
#include "runtime/error.hpp"
#include "sim/simulation.hpp"
#include "sim/virtual_clock.hpp"

#include <fmt/format.h>

namespace kvtier::sim {

caf::expected<trace> read_configured_trace(const config& cfg) {
  trace_read_options ro;
  ro.skip_bad = cfg.sim.skip_bad;
  ro.max_requests = cfg.sim.max_requests;
  ro.time_scale = cfg.sim.time_scale;
  ro.block_tokens = cfg.sim.trace_block_tokens;
  // validate() guarantees the [sim.synthetic] table is there; [sim] max_requests
  // and time_scale apply to a generated trace as to a read one.
  if (cfg.sim.trace_format == trace_format_choice::synthetic)
    return generate_synthetic(*cfg.sim.synthetic, ro);
  auto format = parse_trace_format(name_of(cfg.sim.trace_format));
  if (!format)
    return std::move(format.error());
  if (cfg.sim.trace.empty())
    return read_default_trace(*format, ro);
  return read_trace(cfg.sim.trace, *format, ro);
}

caf::error timed_run_refusal(const config& cfg) {
  if (cfg.cache.policy == eviction_policy::oracle)
    return make_error(
        errc::invalid_config,
        fmt::format("{}: [cache] policy = \"oracle\" knows the future and bounds what any policy can reach; it runs "
                    "with --cache-only (timed runs use \"lru\")",
                    cfg.source));
  return {};
}

namespace {

caf::error saturated_clock() {
  return make_error(errc::invalid_config,
                    fmt::format("the simulated clock reached its limit of {:.3g} s (about {:.0f} years): some step "
                                "or transfer would end past it, so no figure of this run can be trusted; check the "
                                "config's rates and the trace's time scale",
                                max_virtual_seconds, max_virtual_seconds / (365.25 * 86400)));
}

} // namespace

caf::error untrusted_run(const run_result& result) {
  if (clock_saturated(result))
    return saturated_clock();
  const auto& s = result.metrics.scheduler;
  uint64_t settled = s.requests_completed + s.requests_rejected;
  if (settled != result.requests_total)
    return make_error(errc::invalid_argument,
                      fmt::format("{} requests neither completed nor rejected (at the last idle point: {} waiting, {} "
                                  "loading, {} running, {} swapped)",
                                  result.requests_total - settled, s.idle_waiting, s.idle_loading, s.idle_running,
                                  s.idle_swapped));
  return {};
}

caf::error untrusted_run(const cluster_result& result) {
  if (result.simulated_seconds >= max_virtual_seconds)
    return saturated_clock();
  uint64_t settled = result.requests_completed + requests_rejected(result);
  if (settled != result.requests_total)
    return make_error(errc::invalid_argument,
                      fmt::format("{} requests neither completed nor rejected on the cluster's replicas",
                                  result.requests_total - settled));
  return {};
}

} // namespace kvtier::sim
