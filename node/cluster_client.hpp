#pragma once
// A client of the cluster: connects to a router (or a node) through CAF's
// middleman and asks it things, blocking. Tests, `kvtier route` and the
// benchmark use it. Calls may come from several threads at once.

#include "node/node_messages.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::node {

class cluster_client {
public:
  /// Connects to the actor published at host:port, retrying until `wait` passed.
  static caf::expected<std::unique_ptr<cluster_client>> connect(const std::string& host, uint16_t port,
                                                                std::chrono::milliseconds wait);
  ~cluster_client();
  cluster_client(const cluster_client&) = delete;
  cluster_client& operator=(const cluster_client&) = delete;

  /// The router runs `r` to its end: prefill, then decode.
  caf::expected<request_result> submit(const request& r);
  /// Every request in flight at once; the answers in the order of `rs`.
  std::vector<caf::expected<request_result>> submit_all(const std::vector<request>& rs);
  /// The router's word on where request `id` is ("decoding on b", "unknown").
  caf::expected<std::string> where(uint64_t id);
  /// The router's live members, in the order of its list.
  caf::expected<std::vector<std::string>> live();
  /// Every member the router knows, in the order of its list.
  caf::expected<std::vector<std::string>> members();
  /// A node's counters (connected to the node, not the router).
  caf::expected<node_stats> stats();

private:
  struct impl;
  explicit cluster_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace kvtier::node
