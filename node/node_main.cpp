#include "node/node_main.hpp"

#include "node/node_actor.hpp"
#include "node/router_actor.hpp"
#include "runtime/error.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/send.hpp>

#include <fmt/format.h>

#include <csignal>
#include <cstdio>

namespace kvtier::node {

namespace {

// The middleman's own settings for a cluster process: heartbeats and the
// silence after which a peer counts as gone.
struct cluster_system_config : caf::actor_system_config {
  explicit cluster_system_config(const node_config& c) {
    load<caf::io::middleman>();
    add_node_message_types(*this);
    set("middleman.heartbeat-interval", caf::timespan{std::chrono::milliseconds(c.heartbeat_ms)});
    set("middleman.connection-timeout", caf::timespan{std::chrono::milliseconds(c.connection_timeout_ms)});
    set("logger.verbosity", caf::atom("quiet"));
  }
};

} // namespace

int run_node(const node_config& config) {
  // SIGTERM and SIGINT are waited for below; every thread the actor system
  // starts inherits the mask, so none of them takes the signal instead.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::shared_ptr<node_core> core;
  if (config.role != node_role::router) {
    auto opened = open_node(config);
    if (!opened) {
      fmt::print(stderr, "kvtierd: {}\n", describe(opened.error()));
      return 1;
    }
    core = std::move(*opened);
  }
  cluster_system_config cfg(config);
  caf::actor_system system(cfg);
  caf::actor actor = core ? system.spawn(node_actor, core) : system.spawn(router_actor, config);
  auto port = system.middleman().publish(actor, config.port, config.host.c_str(), true);
  if (!port) {
    fmt::print(stderr, "kvtierd: cannot listen on {}:{}: {}\n", config.host, config.port, describe(port.error()));
    caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
    return 1;
  }
  fmt::print("kvtierd: {} node {} listening on {}:{}", to_string(config.role), config.name, config.host, *port);
  if (core)
    fmt::print("; remote store {}:{}, {} blocks of {} tokens ({} bytes) in its own tier", config.redis_host,
               config.redis_port, config.dram_blocks, config.block_tokens, config.block_bytes);
  else
    fmt::print("; {} member node(s)", config.members.size());
  fmt::print("\n");
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  fmt::print("kvtierd: stopped\n");
  return 0;
}

} // namespace kvtier::node
