#include "sim/cluster_simulation.hpp"

#include "runtime/check.hpp"
#include "runtime/prefix_chain.hpp"
#include "sim/cluster_lru.hpp"
#include "sim/cluster_router.hpp"
#include "sim/link_model.hpp"
#include "sim/lockstep_pool.hpp"
#include "sim/sim_backend.hpp"
#include "sim/virtual_clock.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <unordered_map>

namespace kvtier::sim {
namespace {

constexpr uint32_t no_replica = ~0u;
// The router's views keep every 16th block of a chain (256 tokens at 16-token
// blocks): prefixes are told apart to within 15 blocks, at 1/16 of the cost.
constexpr uint32_t view_stride = 16;

link_report report_of(const link_model& link) {
  return {link.bytes(), link.operations(), link.busy_seconds(), link.profile().gbps};
}

// What the cluster remembers of a request between its arrival and its end.
struct request_info {
  double arrival = 0;
  double first_token = -1;
  uint32_t index = 0;            // arrival order
  request_spec spec;             // as it arrived, without its prompt's KV
  std::vector<block_hash> chain; // its prompt's blocks, hashed once
};

// The config as the simulated backend runs it: a real run's remote tier
// ([remote], in the NVMe tier's place) is the cluster's shared tier here.
config simulated(config cfg) {
  cfg.backend = backend_kind::sim;
  return cfg;
}

// The test scheduler: actors run when the simulation runs them, and time is
// the clock's, moved from one scheduled event to the next.
caf::actor_system_config& virtual_time_config(caf::actor_system_config& c) {
  c.set("scheduler.policy", caf::atom("testing"));
  c.set("logger.verbosity", caf::atom("quiet"));
  return c;
}

// A request that produced its last token on a replica, as the replica's
// scheduler reported it; the cluster applies it at the next barrier.
struct completion {
  uint64_t id;
  double first, done; // seconds since the epoch
};

// One replica: the single-node graph over its own simulated backend, in its
// own actor system with its own virtual clock, so that replicas advance on
// different threads between two decisions of the router.
struct replica {
  replica(const config& cfg, run_result& result)
      : system(virtual_time_config(system_config)),
        scheduler(dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler())),
        driver(system, simulated(cfg), result),
        backend(system, driver.context().cfg, driver.epoch()),
        nic_in(cfg.hardware.nic),
        nic_out(cfg.hardware.nic) {
    system.await_actors_before_shutdown(false);
    driver.context().on_complete = [this](uint64_t id, double first, double done) {
      completed.push_back({id, first, done});
    };
    driver.start(backend);
  }

  // Runs every event up to and including `until`; what completes is kept in `completed`.
  void advance(caf::actor_clock::time_point until) {
    auto& clock = scheduler.clock();
    for (;;) {
      messages += scheduler.run();
      const auto& pending = clock.schedule();
      if (pending.empty() || pending.begin()->first > until)
        return;
      scheduler.trigger_timeout();
    }
  }
  caf::actor_clock::time_point now() { return scheduler.clock().now(); }
  // `seconds` since the epoch on this replica's clock, to the nearest nanosecond.
  caf::actor_clock::time_point at(double seconds) const { return at_ns(virtual_ns_nearest(seconds)); }
  caf::actor_clock::time_point at_ns(int64_t ns) const {
    return driver.epoch() + std::chrono::duration_cast<caf::actor_clock::duration_type>(std::chrono::nanoseconds{ns});
  }

  caf::actor_system_config system_config;
  caf::actor_system system;
  caf::scheduler::test_coordinator& scheduler;
  run_driver driver;
  sim_backend backend;
  link_model nic_in, nic_out;
  uint64_t assigned = 0; // requests routed here (deliveries in flight included)
  uint64_t messages = 0;
  std::vector<completion> completed; // since the cluster last took them
};

// The cluster's state: the router's views, the remote tier, the network, and
// the replicas. Conservative lockstep: before each arrival time every replica runs
// up to that time (in parallel: between two decisions of the router
// replicas share nothing), then what completed is applied in time order, then
// the router decides. So every decision sees the replicas as a single clock
// would, and no result depends on the number of threads.
class cluster {
public:
  cluster(const config& cfg, cluster_result& out)
      : cfg_(cfg),
        out_(out),
        B_(cfg.cache.block_tokens),
        block_bytes_(cfg.offload_block_bytes()),
        remote_(static_cast<uint32_t>(cfg.cluster.remote_capacity_bytes / std::max<uint64_t>(1, block_bytes_))),
        remote_read_(link_profile{cfg.cluster.remote_gbps, cfg.cluster.remote_latency_us, 0}),
        remote_write_(link_profile{cfg.cluster.remote_gbps, cfg.cluster.remote_latency_us, 0}),
        front_(make_router(cfg, prefill_pool(cfg))),
        back_(make_router(cfg, decode_pool(cfg), router_kind::least_loaded)),
        lanes_(lockstep_pool::threads_for(cfg.cluster.threads, widest_pool(cfg)) - 1) {
    const auto& k = cfg.cluster;
    out_.replicas.resize(k.replicas);
    out_.roles.assign(k.replicas, replica_role::both);
    for (uint32_t r = 0; r < k.replicas; ++r)
      if (k.disaggregated())
        out_.roles[r] = r < k.prefill ? replica_role::prefill : replica_role::decode;
    out_.remote_capacity_blocks = remote_.capacity();
    for (uint32_t r = 0; r < k.replicas; ++r) {
      replicas_.push_back(std::make_unique<replica>(cfg, out_.replicas[r]));
      (out_.roles[r] == replica_role::decode ? decoders_ : computers_).push_back(r);
    }
  }

  uint32_t threads() const { return lanes_.threads(); }

  /// Runs every replica up to `seconds` since the epoch and applies what
  /// completed by then, in time order (ties: by replica, then as reported).
  void advance_to(double seconds) { advance_to_ns(virtual_ns_nearest(seconds)); }
  void drain() { advance_to_ns(max_virtual_ns); }

  void on_arrival(request_spec spec, double now) {
    auto chain = chain_of(spec);
    auto r = front_.route(chain, outstanding());
    request_info info;
    info.arrival = now;
    info.index = static_cast<uint32_t>(out_.placement.size());
    out_.placement.push_back(r);
    out_.decode_placement.push_back(no_replica);
    ++out_.routed[r];
    // The remote tier supplies what it holds beyond what the replica is
    // believed to hold: those blocks cross the remote tier's link and the
    // replica's NIC before the request reaches the replica.
    double at = now;
    size_t local = front_.held_prefix(r, chain);
    size_t remote = remote_.prefix(chain);
    if (remote > local) {
      uint64_t blocks = remote - local;
      uint64_t bytes = blocks * block_bytes_;
      at = std::max(remote_read_.submit(now, bytes, blocks), replicas_[r]->nic_in.submit(now, bytes, blocks));
      out_.remote_fetched_blocks += blocks;
      spec.supplied_tokens = std::min<uint64_t>(uint64_t{remote} * B_, spec.prompt_tokens);
    }
    front_.remember(r, chain);
    info.chain = std::move(chain);
    info.spec = spec;
    info.spec.supplied_tokens = 0;
    if (cfg_.cluster.disaggregated())
      spec.output_tokens = 1; // the prefill replica computes the prompt and samples the first token
    requests_.emplace(spec.id, std::move(info));
    deliver(r, std::move(spec), at);
  }

  void finish(double last_arrival) {
    double simulated_seconds = last_arrival;
    for (auto& r : replicas_) {
      simulated_seconds = std::max(simulated_seconds, seconds_since(r->driver.context(), r->now()));
      out_.messages += r->messages;
    }
    out_.simulated_seconds = simulated_seconds;
    for (size_t r = 0; r < replicas_.size(); ++r) {
      out_.replicas[r].simulated_seconds = simulated_seconds;
      out_.replicas[r].requests_total = out_.routed[r];
      replicas_[r]->driver.collect_links();
      out_.nic_in.push_back(report_of(replicas_[r]->nic_in));
      out_.nic_out.push_back(report_of(replicas_[r]->nic_out));
    }
    out_.remote_read = report_of(remote_read_);
    out_.remote_write = report_of(remote_write_);
    out_.remote_evictions = remote_.evictions();
  }

  void stop() {
    for (auto& r : replicas_) {
      r->driver.stop();
      r->scheduler.run();
    }
  }

private:
  // The most replicas one fork advances: more threads would only spin.
  static uint32_t widest_pool(const config& cfg) {
    const auto& k = cfg.cluster;
    return k.disaggregated() ? std::max(k.prefill, k.decode) : k.replicas;
  }
  static std::vector<uint32_t> prefill_pool(const config& cfg) {
    const auto& k = cfg.cluster;
    std::vector<uint32_t> pool(k.disaggregated() ? k.prefill : k.replicas);
    for (uint32_t i = 0; i < pool.size(); ++i)
      pool[i] = i;
    return pool;
  }
  static std::vector<uint32_t> decode_pool(const config& cfg) {
    const auto& k = cfg.cluster;
    if (!k.disaggregated())
      return prefill_pool(cfg);
    std::vector<uint32_t> pool(k.decode);
    for (uint32_t i = 0; i < pool.size(); ++i)
      pool[i] = k.prefill + i;
    return pool;
  }
  // The router's view of a replica is as large as the replica's local tiers.
  static cluster_router make_router(const config& cfg, std::vector<uint32_t> pool) {
    return make_router(cfg, std::move(pool), cfg.cluster.router);
  }
  static cluster_router make_router(const config& cfg, std::vector<uint32_t> pool, router_kind kind) {
    auto local = cfg.hbm_blocks() + cfg.dram_blocks() + cfg.nvme_blocks(); // below 2^25 (validate)
    return {kind, cfg.cluster.load_slack, cfg.cluster.replicas, std::move(pool), local, view_stride};
  }

  std::vector<block_hash> chain_of(const request_spec& spec) const {
    if (spec.external_ids.empty())
      return {};
    return chain_from_external(spec.external_ids, spec.external_block_tokens, spec.prompt_tokens, B_,
                               tenant_salt{spec.tenant});
  }

  std::vector<uint64_t> outstanding() const {
    std::vector<uint64_t> load(replicas_.size());
    for (size_t r = 0; r < replicas_.size(); ++r)
      load[r] = replicas_[r]->assigned - replicas_[r]->driver.context().settled.load();
    return load;
  }

  void deliver(uint32_t r, request_spec spec, double at) {
    auto& rep = *replicas_[r];
    ++rep.assigned;
    auto target = caf::actor_cast<caf::strong_actor_ptr>(rep.driver.graph().scheduler);
    rep.scheduler.clock().schedule_message(
        rep.at(at), target,
        caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, arrive_atom::value, std::move(spec)));
  }

  void advance_to_ns(int64_t until_ns) {
    advance(computers_, until_ns);
    if (decoders_.empty())
      return apply(computers_);
    // A prefill completion hands its request to a decode replica, chosen by
    // the decode pool's load at that moment: the decode replicas run up to
    // each handoff before it is routed.
    auto handoffs = take_completions(computers_);
    for (const auto& h : handoffs) {
      advance(decoders_, virtual_ns_nearest(h.second.done));
      apply(decoders_);
      on_complete(h.first, h.second.id, h.second.first, h.second.done);
    }
    advance(decoders_, until_ns);
    apply(decoders_);
  }

  void advance(const std::vector<uint32_t>& which, int64_t until_ns) {
    lanes_.parallel_for(which.size(), [&](size_t i) {
      auto& r = *replicas_[which[i]];
      r.advance(r.at_ns(until_ns));
    });
  }

  // Completions of `which`, by time, then replica, then report order.
  std::vector<std::pair<uint32_t, completion>> take_completions(const std::vector<uint32_t>& which) {
    std::vector<std::pair<uint32_t, completion>> all;
    for (uint32_t r : which) {
      for (const auto& c : replicas_[r]->completed)
        all.emplace_back(r, c);
      replicas_[r]->completed.clear();
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.second.done < b.second.done; });
    return all;
  }

  void apply(const std::vector<uint32_t>& which) {
    for (const auto& [r, c] : take_completions(which))
      on_complete(r, c.id, c.first, c.done);
  }

  // A replica that computed a prompt stores its blocks in the remote tier
  // (those it does not hold yet), over its NIC; nothing waits on the write.
  void store_remote(uint32_t r, const std::vector<block_hash>& chain, double t) {
    if (remote_.capacity() == 0)
      return;
    uint64_t blocks = remote_.insert(chain);
    if (blocks == 0)
      return;
    out_.remote_stored_blocks += blocks;
    remote_write_.submit(t, blocks * block_bytes_, blocks);
    replicas_[r]->nic_out.submit(t, blocks * block_bytes_, blocks);
  }

  void complete(request_info& info, double first, double done) {
    ++out_.requests_completed;
    out_.ttft_s.push_back(first - info.arrival);
    out_.e2e_s.push_back(done - info.arrival);
    if (info.spec.output_tokens > 1)
      out_.tpot_s.push_back((done - first) / (info.spec.output_tokens - 1));
  }

  void on_complete(uint32_t r, uint64_t id, double first, double done) {
    auto it = requests_.find(id);
    KVTIER_CHECK(it != requests_.end(), "cluster: a completion for a request never routed");
    auto& info = it->second;
    auto role = out_.roles[r];
    if (role != replica_role::decode)
      store_remote(r, info.chain, done);
    if (role == replica_role::decode) {
      complete(info, info.first_token, done);
      requests_.erase(it);
      return;
    }
    if (role == replica_role::both || info.spec.output_tokens == 1) {
      complete(info, first, done);
      requests_.erase(it);
      return;
    }
    // Prefill done: its KV crosses to a decode replica, which decodes the rest.
    info.first_token = first;
    info.chain = {};
    auto d = back_.route({}, outstanding());
    out_.decode_placement[info.index] = d;
    ++out_.routed[d];
    uint64_t blocks = (info.spec.prompt_tokens + B_ - 1) / B_;
    uint64_t bytes = blocks * block_bytes_;
    double at =
        std::max(replicas_[r]->nic_out.submit(done, bytes, blocks), replicas_[d]->nic_in.submit(done, bytes, blocks));
    out_.handoff_blocks += blocks;
    out_.handoff_bytes += bytes;
    request_spec spec = info.spec;
    spec.output_tokens = info.spec.output_tokens - 1;
    spec.supplied_tokens = spec.prompt_tokens;
    deliver(d, std::move(spec), at);
  }

  const config& cfg_;
  cluster_result& out_;
  uint32_t B_;
  uint64_t block_bytes_;
  hash_lru remote_;
  link_model remote_read_, remote_write_;
  cluster_router front_; // whole requests, or the prefill pool
  cluster_router back_;  // the decode pool
  std::vector<std::unique_ptr<replica>> replicas_;
  std::vector<uint32_t> computers_; // replicas that take requests from the router (both, or prefill)
  std::vector<uint32_t> decoders_;  // the decode pool (empty without pools)
  lockstep_pool lanes_;
  std::unordered_map<uint64_t, request_info> requests_;
};

} // namespace

uint64_t requests_rejected(const cluster_result& result) {
  uint64_t rejected = 0;
  for (const auto& r : result.replicas)
    rejected += r.metrics.scheduler.requests_rejected;
  return rejected;
}

cluster_result run_cluster(const config& cfg, std::vector<timed_request> requests) {
  auto wall_start = std::chrono::steady_clock::now();
  cluster_result out;
  out.requests_total = requests.size();
  out.routed.assign(cfg.cluster.replicas, 0);

  cluster c(cfg, out);
  out.threads = c.threads();
  // Arrival order; equal times keep the trace's order.
  std::stable_sort(requests.begin(), requests.end(),
                   [](const timed_request& a, const timed_request& b) { return a.arrival_s < b.arrival_s; });
  // Requests that arrive at the same instant are routed one after another with
  // the loads of that instant (the router's own deliveries counted in).
  double last_arrival = -1;
  for (auto& r : requests) {
    // The clock's own resolution: an arrival happens at a whole nanosecond.
    const double at = static_cast<double>(virtual_ns(r.arrival_s)) * 1e-9;
    if (at != last_arrival)
      c.advance_to(at);
    c.on_arrival(std::move(r.spec), at);
    last_arrival = at;
  }
  last_arrival = std::max(last_arrival, 0.0);
  requests.clear();
  c.drain();
  c.finish(last_arrival);
  c.stop();
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return out;
}

} // namespace kvtier::sim
