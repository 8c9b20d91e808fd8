#include "node/cluster_client.hpp"

#include "runtime/error.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <future>
#include <thread>

namespace kvtier::node {

namespace {

// Heartbeats every 100 ms: a router drops a connection that stays silent for
// its connection_timeout_ms (20 ms at the least), and a client waiting for a
// long request sends nothing else.
struct client_system_config : caf::actor_system_config {
  client_system_config() {
    load<caf::io::middleman>();
    add_node_message_types(*this);
    set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(100)});
    set("logger.verbosity", caf::atom("quiet"));
  }
};

} // namespace

struct cluster_client::impl {
  client_system_config config;
  caf::actor_system system{config};
  caf::actor peer;

  template <class T, class... Ts>
  caf::expected<T> ask(Ts&&... xs) {
    caf::scoped_actor self{system};
    caf::expected<T> out = make_error(errc::protocol, "no answer");
    self->request(peer, caf::infinite, std::forward<Ts>(xs)...)
        .receive([&](T& value) { out = std::move(value); }, [&](caf::error& e) { out = std::move(e); });
    return out;
  }
};

cluster_client::cluster_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {
}
cluster_client::~cluster_client() = default;

caf::expected<std::unique_ptr<cluster_client>> cluster_client::connect(const std::string& host, uint16_t port,
                                                                       std::chrono::milliseconds wait) {
  auto p = std::make_unique<impl>();
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    auto peer = p->system.middleman().remote_actor(host, port);
    if (peer) {
      p->peer = std::move(*peer);
      return std::unique_ptr<cluster_client>(new cluster_client(std::move(p)));
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(errc::io_failure,
                        "cannot reach the cluster at " + host + ":" + std::to_string(port) + ": " +
                            describe(peer.error()));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

caf::expected<request_result> cluster_client::submit(const request& r) {
  return impl_->ask<request_result>(submit_atom::value, r);
}

std::vector<caf::expected<request_result>> cluster_client::submit_all(const std::vector<request>& rs) {
  // One blocking actor per request, each on a thread of its own: a blocking
  // actor that awaits one response drops others that arrive meanwhile, and
  // the router answers in any order.
  std::vector<std::future<caf::expected<request_result>>> answers;
  for (const auto& r : rs)
    answers.push_back(std::async(std::launch::async, [this, &r] { return submit(r); }));
  std::vector<caf::expected<request_result>> out;
  for (auto& a : answers)
    out.push_back(a.get());
  return out;
}

caf::expected<std::string> cluster_client::where(uint64_t id) {
  return impl_->ask<std::string>(where_atom::value, id);
}

caf::expected<std::vector<std::string>> cluster_client::live() {
  return impl_->ask<std::vector<std::string>>(live_atom::value);
}

caf::expected<std::vector<std::string>> cluster_client::members() {
  return impl_->ask<std::vector<std::string>>(members_atom::value);
}

caf::expected<node_stats> cluster_client::stats() {
  return impl_->ask<node_stats>(stats_atom::value);
}

} // namespace kvtier::node
