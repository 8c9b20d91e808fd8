#include "daemon/http_endpoint.hpp"

#include "runtime/error.hpp"

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace kvtier::daemon {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

struct exchange : std::enable_shared_from_this<exchange> {
  exchange(tcp::socket s, http_endpoint::render_fn m, http_endpoint::healthy_fn h)
      : stream(std::move(s)), metrics(std::move(m)), healthy(std::move(h)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  http::request<http::string_body> request;
  http::response<http::string_body> response;
  http_endpoint::render_fn metrics;
  http_endpoint::healthy_fn healthy;

  void start() {
    stream.expires_after(std::chrono::seconds(10));
    http::async_read(stream, buffer, request, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (!ec)
        self->answer();
    });
  }
  void answer() {
    response.version(request.version());
    response.keep_alive(false);
    response.set(http::field::server, "kvtierd");
    const auto target = std::string(request.target());
    if (request.method() != http::verb::get) {
      response.result(http::status::method_not_allowed);
      response.body() = "only GET\n";
    } else if (target == "/metrics") {
      response.result(http::status::ok);
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      response.body() = metrics();
    } else if (target == "/healthz") {
      const bool ok = healthy();
      response.result(ok ? http::status::ok : http::status::service_unavailable);
      response.body() = ok ? "ok\n" : "stopping\n";
    } else {
      response.result(http::status::not_found);
      response.body() = "/metrics or /healthz\n";
    }
    response.prepare_payload();
    http::async_write(stream, response, [self = shared_from_this()](beast::error_code, std::size_t) {
      beast::error_code ignored;
      self->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    });
  }
};

} // namespace

caf::expected<std::unique_ptr<http_endpoint>> http_endpoint::open(asio::io_context& io, const std::string& address,
                                                                  render_fn metrics, healthy_fn healthy) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos)
    return make_error(errc::invalid_config, "[daemon] metrics: expected host:port, got \"" + address + "\"");
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address.substr(0, colon), ec);
  if (ec)
    return make_error(errc::invalid_config, "[daemon] metrics: \"" + address + "\": " + ec.message());
  if (!ip.is_loopback())
    return make_error(errc::invalid_config, "[daemon] metrics: \"" + address + "\" is not a loopback address");
  unsigned long port = 0;
  try {
    port = std::stoul(address.substr(colon + 1));
  } catch (...) {
    port = 65536;
  }
  if (port > 65535)
    return make_error(errc::invalid_config, "[daemon] metrics: \"" + address + "\": expected a port 0-65535");
  std::unique_ptr<http_endpoint> e(new http_endpoint(io, std::move(metrics), std::move(healthy)));
  const tcp::endpoint ep(ip, static_cast<unsigned short>(port));
  e->acceptor_.open(ep.protocol(), ec);
  if (!ec)
    e->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec)
    e->acceptor_.bind(ep, ec);
  if (!ec)
    e->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return make_error(errc::io_failure, "[daemon] metrics: cannot listen on " + address + ": " + ec.message());
  e->accept();
  return e;
}

void http_endpoint::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket s) {
    if (ec)
      return; // closed
    std::make_shared<exchange>(std::move(s), metrics_, healthy_)->start();
    accept();
  });
}

void http_endpoint::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
}

std::string http_endpoint::address() const {
  boost::system::error_code ec;
  const auto ep = acceptor_.local_endpoint(ec);
  return ec ? "" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

} // namespace kvtier::daemon
