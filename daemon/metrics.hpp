#pragma once
// The daemon's operation metrics and their Prometheus text rendering
// (/metrics): request counts and latency histograms per operation, errors
// by code, and, from the store and the tenants, hits per tier and per
// tenant, evictions, occupancy and the NVMe link's bytes and busy time.
//
// Invariant: every request that got a reply is counted exactly once, in its
// operation's histogram and, when refused, in errors by code.

#include "client/result.hpp"
#include "client/wire.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace kvtier::daemon {

class block_store;
class tenant_table;

/// A latency histogram with fixed bounds from 10 us to 1 s.
struct latency_histogram {
  static constexpr std::array<double, 14> bounds{1e-5,   2.5e-5, 5e-5, 1e-4,   2.5e-4, 5e-4, 1e-3,
                                                 2.5e-3, 5e-3,   1e-2, 2.5e-2, 0.1,    0.25, 1.0};
  std::array<std::uint64_t, bounds.size() + 1> counts{}; // last: above every bound
  double sum = 0;
  std::uint64_t count = 0;
  void add(double seconds);
};

class daemon_metrics {
public:
  void record(wire::op op, double seconds, client::errc status);
  void session_opened() { ++sessions_total_; }
  void frame_rejected() { ++frames_rejected_; }
  /// How late the io thread ran a timer that was due: the wait a request
  /// that just arrived has before the thread can look at it.
  void io_lag(double seconds) { io_lag_.add(seconds); }
  std::uint64_t requests(wire::op op) const { return ops_[index(op)].count; }

  /// Each link's stated limit in GB/s (0: not stated).
  struct link_limits {
    double copy = 0, nvme_read = 0, nvme_write = 0;
  };
  void set_link_limits(link_limits l) { limits_ = l; }

  /// The Prometheus text exposition (version 0.0.4).
  std::string render(const block_store& store, const tenant_table& tenants, std::uint64_t sessions_open) const;

private:
  static std::size_t index(wire::op op) { return static_cast<std::size_t>(op) - 1; }
  std::array<latency_histogram, 8> ops_{};
  std::array<std::uint64_t, 9> errors_{}; // by client::errc
  latency_histogram io_lag_;
  link_limits limits_;
  std::uint64_t sessions_total_ = 0;
  std::uint64_t frames_rejected_ = 0;
};

} // namespace kvtier::daemon
