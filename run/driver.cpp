#include "run/driver.hpp"

#include "runtime/check.hpp"

#include <caf/all.hpp>

#include <algorithm>
#include <chrono>

namespace kvtier {

run_driver::run_driver(caf::actor_system& system, const config& cfg, run_result& result)
    : system_(system), result_(result) {
  context_.cfg = cfg;
  context_.costs = std::make_unique<cost_model>(context_.cfg);
  context_.metrics = &result.metrics;
  context_.epoch = system.clock().now();
}

void run_driver::start(backend& io) {
  KVTIER_CHECK(context_.io == nullptr, "run_driver::start called twice");
  context_.io = &io;
  graph_ = spawn_graph(system_, context_);
}

namespace {

// An arrival's offset from the epoch. Negative or NaN times arrive at once;
// times past 2^62 ns (146 years) are held there: a double beyond int64 would
// be undefined behaviour in the cast, and a wrapped clock would reorder the run.
caf::actor_clock::duration_type arrival_offset(double seconds) {
  constexpr double limit_s = 4.611686018427387904e9; // 2^62 ns
  if (!(seconds > 0))
    return caf::actor_clock::duration_type::zero();
  seconds = std::min(seconds, limit_s);
  return std::chrono::duration_cast<caf::actor_clock::duration_type>(std::chrono::duration<double>(seconds));
}

} // namespace

void run_driver::schedule_arrivals(std::vector<timed_request> requests, double time_scale) {
  KVTIER_CHECK(context_.io != nullptr, "run_driver: start() before schedule_arrivals()");
  auto target = caf::actor_cast<caf::strong_actor_ptr>(graph_.scheduler);
  for (auto& r : requests) {
    auto at = context_.epoch + arrival_offset(r.arrival_s * time_scale);
    system_.clock().schedule_message(
        at, target,
        caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, arrive_atom::value, std::move(r.spec)));
  }
}

void run_driver::collect_links() {
  const auto& hw = context_.cfg.hardware;
  auto link = [](const link_counters& c, double limit) {
    return link_report{c.bytes,
                       c.operations,
                       c.busy_seconds,
                       limit,
                       c.kv_bytes == 0 ? c.bytes : c.kv_bytes,
                       c.link_seconds,
                       c.requests,
                       c.issue_seconds,
                       c.start_lag_seconds,
                       c.end_lag_seconds};
  };
  auto& io = *context_.io;
  result_.h2d = link(io.copies().h2d_counters(), hw.pcie.h2d.gbps);
  result_.d2h = link(io.copies().d2h_counters(), hw.pcie.d2h.gbps);
  if (auto* pages = io.pages()) {
    // The remote tier, where a real run has one in the NVMe tier's place, is limited by its own link.
    bool remote = context_.cfg.remote_blocks() > 0;
    result_.nvme_read = link(pages->read_counters(), remote ? context_.cfg.cluster.remote_gbps : hw.nvme.read_gbps);
    result_.nvme_write = link(pages->write_counters(), remote ? context_.cfg.cluster.remote_gbps : hw.nvme.write_gbps);
  }
}

void run_driver::stop() {
  for (auto h : {caf::actor_cast<caf::actor>(graph_.scheduler), caf::actor_cast<caf::actor>(graph_.blocks),
                 caf::actor_cast<caf::actor>(graph_.transfers), caf::actor_cast<caf::actor>(graph_.compression)})
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
}

} // namespace kvtier
