#include "daemon/server.hpp"

#include "daemon/http_endpoint.hpp"
#include "daemon/session.hpp"
#include "runtime/error.hpp"

#include <boost/asio/post.hpp>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <vector>

namespace kvtier::daemon {

namespace asio = boost::asio;

server::server(daemon_config config)
    : config_(std::move(config)), tenants_(config_.tenants), drain_timer_(io_), lag_timer_(io_) {
  metrics_.set_link_limits({config_.dram_copy_gbps, config_.nvme_read_gbps, config_.nvme_write_gbps});
}

server::~server() {
  close_sessions();
  if (unix_ && !config_.socket.empty())
    ::unlink(config_.socket.c_str());
}

caf::expected<std::unique_ptr<server>> server::open(daemon_config config, bool handle_signals) {
  std::unique_ptr<server> s(new server(std::move(config)));
  auto& c = s->config_;
  store_options so{c.block_bytes, c.dram_slots(), c.dram_prefault, c.nvme_path, c.nvme_slots(), c.nvme, c.copy_threads};
  auto* raw = s.get();
  auto store = block_store::open(
      so, s->tenants_.size(), [raw](std::uint64_t salt) { return raw->tenants_.owner_of_salt(salt); },
      [raw](std::function<void()> fn) { asio::post(raw->io_, std::move(fn)); });
  if (!store)
    return store.error();
  s->store_ = std::move(*store);
  auto ready = ready_set::open(s->io_);
  if (!ready)
    return ready.error();
  s->ready_ = std::move(*ready);
  boost::system::error_code ec;
  if (!c.socket.empty()) {
    struct stat st {};
    if (::lstat(c.socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode))
      ::unlink(c.socket.c_str()); // a socket left by a killed daemon
    s->unix_ = std::make_unique<asio::local::stream_protocol::acceptor>(s->io_);
    const asio::local::stream_protocol::endpoint ep(c.socket);
    s->unix_->open(ep.protocol(), ec);
    if (!ec) {
      const mode_t old = ::umask(0177); // the socket is born 0600: no window where others may connect
      s->unix_->bind(ep, ec);
      ::umask(old);
    }
    if (!ec)
      s->unix_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return make_error(errc::io_failure, "[daemon] socket: cannot listen on " + c.socket + ": " + ec.message());
    s->accept_unix();
  }
  if (!c.tcp.empty()) {
    const auto colon = c.tcp.rfind(':');
    const auto ip = asio::ip::make_address(colon == std::string::npos ? c.tcp : c.tcp.substr(0, colon), ec);
    if (ec || colon == std::string::npos || !ip.is_loopback())
      return make_error(errc::invalid_config, "[daemon] tcp: \"" + c.tcp + "\": expected a loopback host:port");
    unsigned long port = 0;
    try {
      port = std::stoul(c.tcp.substr(colon + 1));
    } catch (...) {
      port = 65536;
    }
    if (port > 65535)
      return make_error(errc::invalid_config, "[daemon] tcp: \"" + c.tcp + "\": expected a port 0-65535");
    for (const auto& t : c.tenants)
      if (t.token.empty())
        return make_error(errc::invalid_config,
                          "[[tenant]] " + t.name + ": a tenant needs a token when the daemon listens on TCP");
    s->tcp_ = std::make_unique<asio::ip::tcp::acceptor>(s->io_);
    const asio::ip::tcp::endpoint ep(ip, static_cast<unsigned short>(port));
    s->tcp_->open(ep.protocol(), ec);
    if (!ec)
      s->tcp_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
      s->tcp_->bind(ep, ec);
    if (!ec)
      s->tcp_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return make_error(errc::io_failure, "[daemon] tcp: cannot listen on " + c.tcp + ": " + ec.message());
    s->accept_tcp();
  }
  if (!c.metrics.empty()) {
    auto http = http_endpoint::open(
        s->io_, c.metrics, [raw] { return raw->render_metrics(); }, [raw] { return !raw->stopping_; });
    if (!http)
      return http.error();
    s->http_ = std::move(*http);
  }
  if (handle_signals) {
    s->signals_ = std::make_unique<asio::signal_set>(s->io_, SIGTERM, SIGINT);
    s->signals_->async_wait([raw](const boost::system::error_code& e, int) {
      if (!e)
        raw->shut_down();
    });
  }
  return s;
}

std::string server::metrics_address() const {
  return http_ ? http_->address() : "";
}

std::string server::tcp_address() const {
  boost::system::error_code ec;
  if (!tcp_)
    return "";
  const auto ep = tcp_->local_endpoint(ec);
  return ec ? "" : ep.address().to_string() + ":" + std::to_string(ep.port());
}

void server::accept_unix() {
  unix_->async_wait(asio::socket_base::wait_read, [this](const boost::system::error_code& ec) {
    if (ec || stopping_)
      return;
    const int fd = ::accept4(unix_->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0)
      start_session(fd, true);
    accept_unix();
  });
}

void server::accept_tcp() {
  tcp_->async_wait(asio::socket_base::wait_read, [this](const boost::system::error_code& ec) {
    if (ec || stopping_)
      return;
    const int fd = ::accept4(tcp_->native_handle(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      start_session(fd, false);
    }
    accept_tcp();
  });
}

void server::start_session(int fd, bool is_unix) {
  if (sessions_.size() >= config_.max_sessions) {
    ::close(fd); // over [daemon] max_sessions: refused at the door
    return;
  }
  auto s = std::make_shared<session>(*this, fd, is_unix);
  sessions_.emplace(s.get(), s);
  s->start();
}

void server::closed(session* s) {
  auto it = sessions_.find(s);
  if (it == sessions_.end())
    return;
  if (retired_.empty())
    asio::post(io_, [this] { retired_.clear(); });
  retired_.push_back(std::move(it->second));
  sessions_.erase(it);
}

void server::close_sessions() {
  std::vector<session*> open;
  for (auto& [s, keep] : sessions_)
    open.push_back(s);
  for (auto* s : open)
    s->close();
}

void server::run() {
  probe_lag();
  io_.run();
}

// A timer every 10 ms measures how long a due event waits for the io thread.
void server::probe_lag() {
  lag_timer_.expires_after(std::chrono::milliseconds(10));
  lag_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_)
      return;
    metrics_.io_lag(std::chrono::duration<double>(std::chrono::steady_clock::now() - lag_timer_.expiry()).count());
    probe_lag();
  });
}

void server::stop() {
  asio::post(io_, [this] { shut_down(); });
}

void server::shut_down() {
  if (stopping_)
    return;
  stopping_ = true;
  boost::system::error_code ignored;
  if (unix_)
    unix_->close(ignored);
  if (tcp_)
    tcp_->close(ignored);
  if (signals_)
    signals_->cancel(ignored);
  lag_timer_.cancel();
  wait_for_moves();
}

// Moves in flight finish and are acknowledged before the sessions close.
void server::wait_for_moves() {
  if (store_->jobs_in_flight() > 0) {
    drain_timer_.expires_after(std::chrono::milliseconds(5));
    drain_timer_.async_wait([this](const boost::system::error_code&) { wait_for_moves(); });
    return;
  }
  close_sessions();
  if (http_)
    http_->close();
  io_.stop();
}

} // namespace kvtier::daemon
