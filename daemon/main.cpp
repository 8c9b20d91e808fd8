// kvtierd: the node-local KV block store, or (a [node] table or --role) a
// cluster node: prefill, decode, both, or the router. Runs in the foreground
// (systemd Type=simple) until SIGTERM or SIGINT; see docs/daemon.md and
// docs/cluster.md.

#include "daemon/daemon_config.hpp"
#include "daemon/server.hpp"
#include "runtime/error.hpp"
#if KVTIER_HAVE_NODE
#include "node/node_main.hpp"
#endif

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <csignal>

int main(int argc, char** argv) {
  CLI::App app{"kvtierd: the node-local KV block store (DRAM and NVMe tiers, shared memory data plane), "
               "or a cluster node (--role)"};
  std::string config_path;
  std::string role;
  app.add_option("config", config_path, "the daemon's TOML config (configs/daemon.toml, configs/cluster/*.toml)")
      ->required();
  app.add_option("--role", role,
                 "run as a cluster node: prefill, decode, both or router (over the [node] table's role)");
  CLI11_PARSE(app, argc, argv);

#if KVTIER_HAVE_NODE
  auto node_config = kvtier::node::read_node_config(config_path, role);
  if (!node_config) {
    fmt::print(stderr, "kvtierd: {}\n", kvtier::describe(node_config.error()));
    return 2;
  }
  if (*node_config)
    return kvtier::node::run_node(**node_config);
#else
  if (!role.empty()) {
    fmt::print(stderr,
               "kvtierd: --role: this kvtierd was built without the cluster roles (they need libhiredis-dev)\n");
    return 2;
  }
#endif

  // SIGTERM and SIGINT are the server's (asio::signal_set); a client that
  // vanishes mid-reply must not kill the daemon.
  std::signal(SIGPIPE, SIG_IGN);
  auto config = kvtier::daemon::read_daemon_config(config_path);
  if (!config) {
    fmt::print(stderr, "kvtierd: {}\n", kvtier::describe(config.error()));
    return 2;
  }
  auto server = kvtier::daemon::server::open(std::move(*config));
  if (!server) {
    fmt::print(stderr, "kvtierd: {}\n", kvtier::describe(server.error()));
    return 1;
  }
  const auto& c = (*server)->config();
  fmt::print("kvtierd: {}\n", (*server)->open_message());
  fmt::print("kvtierd: listening on {}{}{}\n", c.socket.empty() ? "" : c.socket,
             c.tcp.empty() ? "" : " and tcp " + (*server)->tcp_address(),
             c.metrics.empty() ? "" : "; metrics at http://" + (*server)->metrics_address() + "/metrics");
  std::fflush(stdout);
  (*server)->run();
  fmt::print("kvtierd: stopped\n");
  return 0;
}
