#pragma once
// /metrics (Prometheus text) and /healthz over HTTP/1.1 on loopback, with
// Boost.Beast on the daemon's io_context. One request per connection; any
// other path is 404, any other method 405.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <caf/expected.hpp>

#include <functional>
#include <memory>
#include <string>

namespace kvtier::daemon {

class http_endpoint {
public:
  using render_fn = std::function<std::string()>;
  using healthy_fn = std::function<bool()>;
  /// Binds `address` (host:port; port 0 picks one). Errors name the address.
  static caf::expected<std::unique_ptr<http_endpoint>> open(boost::asio::io_context& io, const std::string& address,
                                                            render_fn metrics, healthy_fn healthy);
  void close();
  std::string address() const;

private:
  http_endpoint(boost::asio::io_context& io, render_fn metrics, healthy_fn healthy)
      : acceptor_(io), metrics_(std::move(metrics)), healthy_(std::move(healthy)) {}
  void accept();
  boost::asio::ip::tcp::acceptor acceptor_;
  render_fn metrics_;
  healthy_fn healthy_;
};

} // namespace kvtier::daemon
