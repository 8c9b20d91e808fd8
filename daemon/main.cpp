// kvtierd: the node-local KV block store. Runs in the foreground (systemd
// Type=simple) until SIGTERM or SIGINT; see docs/daemon.md.

#include "daemon/daemon_config.hpp"
#include "daemon/server.hpp"
#include "runtime/error.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <csignal>

int main(int argc, char** argv) {
  CLI::App app{"kvtierd: the node-local KV block store (DRAM and NVMe tiers, shared memory data plane)"};
  std::string config_path;
  app.add_option("config", config_path, "the daemon's TOML config (configs/daemon.toml)")->required();
  CLI11_PARSE(app, argc, argv);

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
