#include "kernels/copy/cpu_mover.hpp"

#include "kernels/copy/copy_plan.hpp"
#include "kernels/copy/worker_pool.hpp"
#include "runtime/check.hpp"
#include "runtime/mutex.hpp"
#include "runtime/worker_queue.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace kvtier::copy {
namespace {

struct host_buffer {
  explicit host_buffer(uint64_t bytes) : size(bytes) {
    // 4 KiB: the NVMe page store registers the DRAM pool for O_DIRECT I/O.
    uint64_t rounded = (bytes + 4095) / 4096 * 4096;
    data = static_cast<std::byte*>(std::aligned_alloc(4096, rounded == 0 ? 4096 : rounded));
    KVTIER_CHECK(data != nullptr, "cannot allocate a host pool");
  }
  ~host_buffer() { std::free(data); }
  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;
  std::byte* data = nullptr;
  uint64_t size = 0;
};

class cpu_mover final : public tier_mover {
public:
  explicit cpu_mover(const mover_options& o)
      : shape_(o.shape),
        hbm_layout_{slot_order::layer_major, o.shape.hbm_slots, o.shape.layers, o.shape.layer_bytes},
        dram_layout_{slot_order::block_major, o.shape.dram_slots, o.shape.layers, o.shape.dram_layer_bytes()},
        hbm_(hbm_layout_.total_bytes()),
        dram_(dram_layout_.total_bytes()),
        threads_(o.host_threads == 0 ? default_host_threads() : o.host_threads),
        costs_(o.costs ? *o.costs : costs_from_profile(pcie_profile{})) {
    KVTIER_CHECK(o.shape.layers > 0 && o.shape.layer_bytes > 0, "pool shape needs layers and layer_bytes");
    KVTIER_CHECK(!o.shape.codec || o.shape.codec->raw_bytes() == o.shape.layer_bytes,
                 "the offload codec's slice is not the pool's layer_bytes");
    for (auto& lane : lanes_)
      lane = std::make_unique<lane_state>(this, threads_);
  }

  ~cpu_mover() override {
    for (auto& lane : lanes_)
      lane->stop();
  }

  std::string name() const override { return "cpu (" + std::to_string(threads_) + " threads per direction)"; }
  bool on_gpu() const override { return false; }

  void submit(move_request request, move_callback done) override {
    auto problem = check_request(request, shape_);
    KVTIER_CHECK(problem.empty(), problem.c_str());
    lanes_[request.to == tier::hbm ? 0 : 1]->push(std::move(request), std::move(done));
  }

  void drain() override {
    for (auto& lane : lanes_)
      lane->drain();
  }

  link_stats stats(tier from, tier) const override { return lanes_[from == tier::dram ? 0 : 1]->stats(); }
  const tier_layout& layout(tier t) const override { return t == tier::hbm ? hbm_layout_ : dram_layout_; }
  const mover_costs& costs() const override { return costs_; }
  copy_path choose(const move_request&) const override { return copy_path::host_memcpy; }
  std::byte* dram_base() override { return dram_.data; }
  void* hbm_base() override { return hbm_.data; }

  void write_slot(tier t, uint32_t slot, std::span<const std::byte> block) override {
    const auto& l = layout(t);
    KVTIER_CHECK(slot < l.slots && block.size() == l.block_bytes(), "write_slot: slot or size out of range");
    std::byte* base = t == tier::hbm ? hbm_.data : dram_.data;
    for (uint32_t layer = 0; layer < l.layers; ++layer)
      std::memcpy(base + l.offset(slot, layer), block.data() + layer * l.layer_bytes, l.layer_bytes);
  }

  void read_slot(tier t, uint32_t slot, std::span<std::byte> block) override {
    const auto& l = layout(t);
    KVTIER_CHECK(slot < l.slots && block.size() == l.block_bytes(), "read_slot: slot or size out of range");
    const std::byte* base = t == tier::hbm ? hbm_.data : dram_.data;
    for (uint32_t layer = 0; layer < l.layers; ++layer)
      std::memcpy(block.data() + layer * l.layer_bytes, base + l.offset(slot, layer), l.layer_bytes);
  }

private:
  // One direction: requests handled in order by one thread, and a pool that
  // copies a request's blocks in parallel.
  struct lane_state {
    lane_state(cpu_mover* owner, uint32_t threads)
        : mover(owner), pool(threads - 1), requests(1, [this](queued& q) { handle(q); }) {}

    void push(move_request r, move_callback done) {
      bool queued_ok = requests.push({std::move(r), std::move(done)});
      KVTIER_CHECK(queued_ok, "submit to a mover that is being destroyed");
    }
    void drain() { requests.drain(); }
    void stop() { requests.close(); }
    link_stats stats() const {
      mutex_lock lock{counters_mutex};
      return counters;
    }

    using queued = std::pair<move_request, move_callback>;
    void handle(queued& item) {
      auto start = std::chrono::steady_clock::now();
      auto [bytes, kv_bytes] = mover->run(item.first, pool);
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      {
        mutex_lock lock{counters_mutex};
        counters.bytes += bytes;
        counters.logical_bytes += kv_bytes;
        counters.operations += item.first.moves.size();
        counters.requests += 1;
        counters.busy_seconds += seconds;
        constexpr auto p = static_cast<size_t>(copy_path::host_memcpy);
        counters.requests_by_path[p] += 1;
        counters.bytes_by_path[p] += bytes;
        counters.link_seconds_by_path[p] += seconds;
      }
      if (item.second)
        item.second(move_result{item.first.tag, bytes, copy_path::host_memcpy, true, {}});
    }

    cpu_mover* mover;
    worker_pool pool;
    mutable kvtier::mutex counters_mutex;
    link_stats counters GUARDED_BY(counters_mutex);
    worker_queue<queued> requests; // last: its thread starts once the members above exist
  };

  /// Bytes across the "link" (packed with a codec) and the same slices' HBM size.
  std::pair<uint64_t, uint64_t> run(const move_request& r, worker_pool& pool) {
    auto range = layers_of(r, shape_);
    const auto& from = layout(r.from);
    const auto& to = layout(r.to);
    const std::byte* src = r.from == tier::hbm ? hbm_.data : dram_.data;
    std::byte* dst = r.to == tier::hbm ? hbm_.data : dram_.data;
    const auto* codec = shape_.codec ? &*shape_.codec : nullptr;
    pool.parallel_for(r.moves.size(), [&](size_t i) {
      const auto& m = r.moves[i];
      for (uint32_t layer = range.first; layer < range.first + range.count; ++layer) {
        const std::byte* in = src + from.offset(m.from_slot, layer);
        std::byte* out = dst + to.offset(m.to_slot, layer);
        if (codec == nullptr)
          std::memcpy(out, in, shape_.layer_bytes);
        else if (r.to == tier::dram)
          quant::encode_slice(*codec, in, out);
        else
          quant::decode_slice(*codec, in, out);
      }
    });
    uint64_t slices = r.moves.size() * range.count;
    return {slices * shape_.dram_layer_bytes(), slices * shape_.layer_bytes};
  }

  pool_shape shape_;
  tier_layout hbm_layout_;
  tier_layout dram_layout_;
  host_buffer hbm_;
  host_buffer dram_;
  uint32_t threads_;
  mover_costs costs_;
  std::unique_ptr<lane_state> lanes_[2]; // [0] to HBM, [1] to DRAM
};

} // namespace

std::unique_ptr<tier_mover> make_cpu_mover(const mover_options& options) {
  return std::make_unique<cpu_mover>(options);
}

} // namespace kvtier::copy
