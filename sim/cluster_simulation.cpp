#include "sim/cluster_simulation.hpp"

#include "runtime/check.hpp"
#include "runtime/prefix_chain.hpp"
#include "sim/cluster_lru.hpp"
#include "sim/cluster_router.hpp"
#include "sim/link_model.hpp"
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

// One replica: the single-node graph over its own simulated backend.
struct replica {
  replica(caf::actor_system& system, const config& cfg, run_result& result)
      : driver(system, simulated(cfg), result),
        backend(system, driver.context().cfg, driver.epoch()),
        nic_in(cfg.hardware.nic),
        nic_out(cfg.hardware.nic) {}
  run_driver driver;
  sim_backend backend;
  link_model nic_in, nic_out;
  uint64_t assigned = 0; // requests routed here (deliveries in flight included)
};

// The cluster's state, shared by the router actor and the replicas'
// completion hooks. Everything runs on the test coordinator's one thread.
class cluster {
public:
  cluster(caf::actor_system& system, const config& cfg, cluster_result& out)
      : system_(system),
        cfg_(cfg),
        out_(out),
        B_(cfg.cache.block_tokens),
        block_bytes_(cfg.offload_block_bytes()),
        remote_(static_cast<uint32_t>(cfg.cluster.remote_capacity_bytes / std::max<uint64_t>(1, block_bytes_))),
        remote_read_(link_profile{cfg.cluster.remote_gbps, cfg.cluster.remote_latency_us, 0}),
        remote_write_(link_profile{cfg.cluster.remote_gbps, cfg.cluster.remote_latency_us, 0}),
        front_(make_router(cfg, prefill_pool(cfg))),
        back_(make_router(cfg, decode_pool(cfg), router_kind::least_loaded)) {
    const auto& k = cfg.cluster;
    out_.replicas.resize(k.replicas);
    out_.roles.assign(k.replicas, replica_role::both);
    for (uint32_t r = 0; r < k.replicas; ++r)
      if (k.disaggregated())
        out_.roles[r] = r < k.prefill ? replica_role::prefill : replica_role::decode;
    out_.remote_capacity_blocks = remote_.capacity();
    for (uint32_t r = 0; r < k.replicas; ++r) {
      replicas_.push_back(std::make_unique<replica>(system, cfg, out_.replicas[r]));
      auto& ctx = replicas_.back()->driver.context();
      ctx.on_complete = [this, r](uint64_t id, double first, double done) { on_complete(r, id, first, done); };
      replicas_.back()->driver.start(replicas_.back()->backend);
    }
  }

  caf::actor_clock::time_point epoch() const { return replicas_.front()->driver.epoch(); }
  std::vector<std::unique_ptr<replica>>& replicas() { return replicas_; }

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

  void finish(double simulated_seconds) {
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
    for (auto& r : replicas_)
      r->driver.stop();
  }

private:
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

  double now() const { return std::chrono::duration<double>(system_.clock().now() - epoch()).count(); }

  void deliver(uint32_t r, request_spec spec, double at) {
    ++replicas_[r]->assigned;
    auto target = caf::actor_cast<caf::strong_actor_ptr>(replicas_[r]->driver.graph().scheduler);
    system_.clock().schedule_message(
        epoch() + virtual_duration(at), target,
        caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, arrive_atom::value, std::move(spec)));
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

  caf::actor_system& system_;
  const config& cfg_;
  cluster_result& out_;
  uint32_t B_;
  uint64_t block_bytes_;
  hash_lru remote_;
  link_model remote_read_, remote_write_;
  cluster_router front_; // whole requests, or the prefill pool
  cluster_router back_;  // the decode pool
  std::vector<std::unique_ptr<replica>> replicas_;
  std::unordered_map<uint64_t, request_info> requests_;
};

caf::actor_clock::duration_type arrival_offset(double seconds) {
  return virtual_duration(seconds);
}

} // namespace

cluster_result run_cluster(const config& cfg, std::vector<timed_request> requests) {
  auto wall_start = std::chrono::steady_clock::now();
  cluster_result out;
  out.requests_total = requests.size();
  out.routed.assign(cfg.cluster.replicas, 0);

  caf::actor_system_config sys_cfg;
  sys_cfg.set("scheduler.policy", caf::atom("testing"));
  sys_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{sys_cfg};
  system.await_actors_before_shutdown(false);
  auto& sched = dynamic_cast<caf::scheduler::test_coordinator&>(system.scheduler());
  auto& clock = sched.clock();

  cluster c(system, cfg, out);
  // The unused int keeps CAF 0.17 from applying an empty argument tuple through
  // a null pointer (undefined behaviour UBSan reports in init_fun_factory).
  auto router = system.spawn(
      [&c, &system, epoch = c.epoch()](caf::event_based_actor*, int) -> caf::behavior {
        return {
            [&c, &system, epoch](arrive_atom, request_spec& spec) {
              c.on_arrival(std::move(spec), std::chrono::duration<double>(system.clock().now() - epoch).count());
            },
        };
      },
      0);
  auto target = caf::actor_cast<caf::strong_actor_ptr>(router);
  for (auto& r : requests)
    clock.schedule_message(
        c.epoch() + arrival_offset(r.arrival_s), target,
        caf::make_mailbox_element(nullptr, caf::make_message_id(), {}, arrive_atom::value, std::move(r.spec)));
  requests.clear();
  for (;;) {
    out.messages += sched.run();
    if (!sched.trigger_timeout())
      break;
  }
  c.finish(std::chrono::duration<double>(clock.now() - c.epoch()).count());
  c.stop();
  caf::anon_send_exit(router, caf::exit_reason::user_shutdown);
  sched.run();
  out.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return out;
}

} // namespace kvtier::sim
