#pragma once
// A simulated cluster: `[cluster] replicas` copies of the
// single-node actor graph (run_driver over a sim_backend each, the very graph
// `kvtier sim` runs), a router in front of them, and between them the modeled
// network: every replica's NIC (the hardware profile's [nic], each
// direction) and a remote tier (L4) all replicas share, with its own capacity
// and bandwidth. With `prefill` and `decode` pools a request prefills on a
// prefill replica (its first token), its KV crosses the network to a decode
// replica, and decodes there without recomputing it. docs/cluster.md has the
// model and its simplifications.
//
// Each replica runs in its own actor system on its own virtual clock; the
// cluster moves them in lockstep, every one up to the next arrival before the
// router decides, on `[cluster] threads` threads (sim/lockstep_pool.hpp).
// Same config and requests give byte-identical results, whatever the threads.

#include "run/driver.hpp"
#include "run/run_result.hpp"
#include "runtime/config.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::sim {

enum class replica_role : uint8_t { both, prefill, decode };

struct cluster_result {
  std::vector<run_result> replicas; // each as a single-node run reports it
  std::vector<replica_role> roles;
  std::vector<uint64_t> routed;           // requests each replica received
  std::vector<uint32_t> placement;        // by request, in arrival order: the replica it was routed to first
  std::vector<uint32_t> decode_placement; // disaggregated: by request, the decode replica (or ~0u: none)
  uint64_t requests_total = 0;
  uint64_t requests_completed = 0;
  std::vector<double> ttft_s, tpot_s, e2e_s; // per completed request, from its arrival at the router
  // The remote tier.
  uint64_t remote_capacity_blocks = 0;
  uint64_t remote_fetched_blocks = 0; // blocks read from it into a replica
  uint64_t remote_stored_blocks = 0;  // blocks written to it
  uint64_t remote_evictions = 0;
  link_report remote_read, remote_write;
  // Prefill to decode handoffs.
  uint64_t handoff_blocks = 0;
  uint64_t handoff_bytes = 0;
  std::vector<link_report> nic_in, nic_out; // per replica
  double simulated_seconds = 0;
  double wall_seconds = 0;
  uint64_t messages = 0;
  uint32_t threads = 1; // that advanced the replicas (results do not depend on it)
};

/// Requests a replica rejected (too large for its memory): with the completed
/// ones, every request of a finished run.
uint64_t requests_rejected(const cluster_result& result);

/// Runs the requests to the end on the cluster `cfg.cluster` describes.
cluster_result run_cluster(const config& cfg, std::vector<timed_request> requests);

} // namespace kvtier::sim
