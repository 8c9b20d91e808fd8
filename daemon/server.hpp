#pragma once
// kvtierd's server: a Boost.Asio io_context on one thread that accepts client
// connections (Unix socket, mode 0600; optional loopback TCP), runs their
// sessions over the block store, serves /metrics and /healthz, and stops on
// SIGTERM or SIGINT.
//
// Invariants:
//  (1) Every request gets a reply or its connection is closed; a session's
//      failure (a bad frame, a client that died) closes that session only.
//  (2) stop() (or SIGTERM) accepts nothing more, lets every NVMe job in
//      flight finish and be acknowledged, then returns from run().
//  (3) A session closed while the io thread serves a batch of ready sockets
//      stays alive until that handler has returned (the batch may still
//      name it): closed sessions are released from a handler of their own.
// Threading: everything runs on the io_context's thread; stop() may be called
// from any thread.

#include "daemon/block_store.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/metrics.hpp"
#include "daemon/ready_set.hpp"
#include "daemon/tenants.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <caf/expected.hpp>

#include <memory>
#include <unordered_map>
#include <vector>

namespace kvtier::daemon {

class session;
class http_endpoint;

class server {
public:
  /// Opens the store, binds every endpoint; errors name what failed.
  static caf::expected<std::unique_ptr<server>> open(daemon_config config, bool handle_signals = true);
  ~server();

  /// Serves until stop() or a signal; returns once every in-flight move settled.
  void run();
  /// Asks run() to finish (any thread).
  void stop();
  /// The metrics endpoint's bound address (host:port), empty when disabled.
  std::string metrics_address() const;
  /// The TCP endpoint's bound address (host:port), empty when disabled.
  std::string tcp_address() const;
  std::string open_message() const { return store_->open_message(); }

  // For sessions.
  const daemon_config& config() const { return config_; }
  block_store& store() { return *store_; }
  tenant_table& tenants() { return tenants_; }
  daemon_metrics& metrics() { return metrics_; }
  bool stopping() const { return stopping_; }
  boost::asio::io_context& io() { return io_; }
  ready_set& ready() { return *ready_; }
  void closed(session* s);
  std::size_t session_count() const { return sessions_.size(); }
  std::string render_metrics() const { return metrics_.render(*store_, tenants_, sessions_.size()); }

private:
  explicit server(daemon_config config);
  void accept_unix();
  void accept_tcp();
  void start_session(int fd, bool is_unix);
  void shut_down();
  void wait_for_moves();
  void close_sessions();
  void probe_lag();

  daemon_config config_;
  boost::asio::io_context io_{1}; // one thread runs it: its own posts skip the shared queue's lock
  tenant_table tenants_;
  daemon_metrics metrics_;
  std::unique_ptr<block_store> store_;
  std::unique_ptr<boost::asio::local::stream_protocol::acceptor> unix_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> tcp_;
  std::unique_ptr<http_endpoint> http_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  boost::asio::steady_timer drain_timer_;
  boost::asio::steady_timer lag_timer_;
  std::unique_ptr<ready_set> ready_;
  std::unordered_map<session*, std::shared_ptr<session>> sessions_;
  std::vector<std::shared_ptr<session>> retired_; // closed, released by the next handler
  bool stopping_ = false;
};

} // namespace kvtier::daemon
