#include "sim/sim_backend.hpp"

#include "sim/virtual_clock.hpp"

#include <caf/actor_cast.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message_id.hpp>

#include <algorithm>
#include <cmath>

namespace kvtier::sim {

struct sim_backend::impl final : copy_engine, page_store, compute_port {
  impl(caf::actor_system& system, const config& cfg, caf::actor_clock::time_point epoch)
      : system(system),
        cfg(cfg),
        costs(cfg),
        epoch(epoch),
        pcie(cfg.hardware.pcie),
        nvme(cfg.hardware.nvme),
        block_bytes(cfg.offload_block_bytes()) {} // blocks cross PCIe and NVMe quantized when offload_dtype is set

  double now() const { return std::chrono::duration<double>(system.clock().now() - epoch).count(); }

  void complete_at(double when, const caf::actor& notify, uint64_t tag, uint64_t bytes) {
    auto at = epoch + virtual_duration(when); // saturates: the run then reports clock_saturated
    system.clock().schedule_message(at, caf::actor_cast<caf::strong_actor_ptr>(notify),
                                    caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                                              completion_atom::value, tag, bytes, caf::error{}));
  }

  // -- copy_engine: one batched submission per job; blocks are block_bytes each.
  void submit(copy_job job, caf::actor notify) override {
    uint64_t bytes = job.moves.size() * block_bytes;
    uint64_t ops = job.moves.size();
    bool up = job.to == tier::hbm;
    const auto& link = up ? pcie.h2d() : pcie.d2h();
    double start = std::max(now(), link.busy_until());
    double done = up ? pcie.submit_h2d(now(), bytes, ops) : pcie.submit_d2h(now(), bytes, ops);
    record(up ? timeline_event::lane::h2d : timeline_event::lane::d2h, start, done, bytes, ops);
    complete_at(done, notify, job.tag, bytes);
  }
  // One operation per block: the blocks' HBM size is operations x HBM block bytes.
  link_counters h2d_counters() const override {
    return {pcie.h2d().bytes(), pcie.h2d().operations(), pcie.h2d().busy_seconds(),
            pcie.h2d().operations() * cfg.geometry.bytes_per_block()};
  }
  link_counters d2h_counters() const override {
    return {pcie.d2h().bytes(), pcie.d2h().operations(), pcie.d2h().busy_seconds(),
            pcie.d2h().operations() * cfg.geometry.bytes_per_block()};
  }

  // -- page_store
  void submit(page_job job, caf::actor notify) override {
    uint64_t bytes = job.pages.size() * block_bytes;
    uint64_t ops = job.pages.size();
    bool write = job.op == page_op::write;
    double done = write ? nvme.submit_write(now(), bytes, ops) : nvme.submit_read(now(), bytes, ops);
    record(write ? timeline_event::lane::nvme_write : timeline_event::lane::nvme_read,
           done - nvme_duration(bytes, ops, write), done, bytes, ops);
    complete_at(done, notify, job.tag, bytes);
  }
  link_counters read_counters() const override {
    return {nvme.read_bytes(), nvme.read_operations(), nvme.read_busy_seconds()};
  }
  link_counters write_counters() const override {
    return {nvme.write_bytes(), nvme.write_operations(), nvme.write_busy_seconds()};
  }

  // -- compute_port: the roofline of cost_model, and the copies of the
  // blocks the step streams from DRAM.
  void execute(step_plan plan, caf::actor notify, uint64_t tag) override {
    step_shape shape;
    uint64_t streamed = 0;
    for (const auto& s : plan.sequences) {
      shape.add(s.new_tokens, s.context_tokens - s.dropped_tokens);
      streamed += s.streamed_blocks;
    }
    double start = now();
    double seconds = costs.step_seconds(shape);
    if (streamed > 0)
      seconds = stream(start, seconds, streamed);
    auto ns = static_cast<uint64_t>(virtual_ns_nearest(seconds)); // a NaN or huge cost saturates, never wraps
    record(timeline_event::lane::compute, start, start + static_cast<double>(ns) * 1e-9, shape.new_tokens,
           static_cast<uint32_t>(plan.sequences.size()));
    complete_at(start + static_cast<double>(ns) * 1e-9, notify, tag, ns);
  }

  /// Streamed blocks cross PCIe host to device during the step, each layer's
  /// slices copied while the layer before computes (docs/model.md): the step
  /// lasts as long as the longer of its compute and its copies, plus the
  /// first layer's copy, which nothing overlaps. Their bytes count on the H2D
  /// link like any copy's. Returns the step's seconds.
  double stream(double start, double compute_seconds, uint64_t blocks) {
    uint64_t bytes = blocks * block_bytes;
    double copy_start = std::max(start, pcie.h2d().busy_until());
    double copy_end = pcie.submit_h2d(start, bytes, blocks);
    record(timeline_event::lane::h2d, copy_start, copy_end, bytes, blocks);
    double one_layer = (copy_end - copy_start) / std::max<uint32_t>(cfg.geometry.model.layers, 1);
    return std::max(compute_seconds, copy_end - start) + one_layer;
  }

  void record(timeline_event::lane lane, double start, double end, uint64_t bytes, uint64_t count) {
    if (timeline)
      timeline->push_back({lane, start, end, bytes, static_cast<uint32_t>(count)});
  }

  double nvme_duration(uint64_t bytes, uint64_t ops, bool write) const {
    const auto& p = cfg.hardware.nvme;
    return p.latency_us * 1e-6 +
        std::max(static_cast<double>(ops) / (write ? p.write_iops : p.read_iops),
                 static_cast<double>(bytes) / ((write ? p.write_gbps : p.read_gbps) * 1e9));
  }

  caf::actor_system& system;
  const config& cfg;
  std::vector<timeline_event>* timeline = nullptr;
  cost_model costs;
  caf::actor_clock::time_point epoch;
  pcie_model pcie;
  nvme_model nvme;
  uint64_t block_bytes;
};

sim_backend::sim_backend(caf::actor_system& system, const config& cfg, caf::actor_clock::time_point epoch)
    : impl_(std::make_unique<impl>(system, cfg, epoch)) {
}

sim_backend::~sim_backend() = default;

copy_engine& sim_backend::copies() {
  return *impl_;
}
page_store* sim_backend::pages() {
  return impl_->cfg.nvme_blocks() > 0 ? impl_.get() : nullptr;
}
compute_port& sim_backend::compute() {
  return *impl_;
}
const pcie_model& sim_backend::pcie() const {
  return impl_->pcie;
}
const nvme_model& sim_backend::nvme() const {
  return impl_->nvme;
}
void sim_backend::record_timeline(std::vector<timeline_event>* events) {
  impl_->timeline = events;
}

} // namespace kvtier::sim
