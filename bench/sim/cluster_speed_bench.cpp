// bench/cluster_speed: how fast the cluster simulation replays the bundled
// Mooncake conversation trace at its recorded arrival rate, against the
// single-node simulation of the same trace (arrivals stretched 3x, the
// default config) measured in the same run as the baseline. Both replay the
// same requests through the same actor graph; the cluster adds replicas, the
// router, the network and the remote tier. The cluster runs twice: on one
// thread, and on `--threads` (default: one per core), whose results must
// agree. Prints a table and JSON (also to --json FILE).
//
//   bench_cluster_speed [--replicas N] [--threads N] [--max-requests N] [--json FILE]

#include "runtime/error.hpp"
#include "sim/cluster_simulation.hpp"
#include "sim/simulation.hpp"
#include "sim/trace.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <string>

using namespace kvtier;
using namespace kvtier::sim;

namespace {

trace mooncake(uint64_t max_requests, double time_scale) {
  trace_read_options o;
  o.max_requests = max_requests;
  o.time_scale = time_scale;
  auto t = read_trace(default_trace_path(), trace_format::mooncake, o);
  if (!t) {
    fmt::print(stderr, "bench_cluster_speed: {}\n", describe(t.error()));
    std::exit(2);
  }
  return std::move(*t);
}

config make_cluster_config(uint32_t replicas, uint32_t threads) {
  auto cfg = parse_config(fmt::format("[cluster]\nreplicas = {}\nrouter = \"cache_aware\"\nload_slack = 8\n"
                                      "remote_capacity = \"8TB\"\nremote_gbps = 100\nthreads = {}\n",
                                      replicas, threads),
                          "bench");
  if (!cfg) {
    fmt::print(stderr, "bench_cluster_speed: {}\n", describe(cfg.error()));
    std::exit(2);
  }
  return *cfg;
}

} // namespace

int main(int argc, char** argv) {
  uint32_t replicas = 8;
  uint32_t threads = 0;
  uint64_t max_requests = 0;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    auto arg = std::string_view(argv[i]);
    if (arg == "--help") {
      fmt::print("usage: bench_cluster_speed [--replicas N] [--threads N] [--max-requests N] [--json FILE]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      fmt::print(stderr, "bench_cluster_speed: {} needs a value\n", arg);
      return 2;
    }
    if (arg == "--replicas")
      replicas = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (arg == "--threads")
      threads = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (arg == "--max-requests")
      max_requests = std::stoull(argv[++i]);
    else if (arg == "--json")
      json_path = argv[++i];
    else {
      fmt::print(stderr, "bench_cluster_speed: unknown flag {}\n", arg);
      return 2;
    }
  }

  auto single_cfg = *parse_config("", "bench");
  auto single = run_simulation(single_cfg, requests_from(mooncake(max_requests, 3.0)));
  auto serial = run_cluster(make_cluster_config(replicas, 1), requests_from(mooncake(max_requests, 1.0)));
  auto cfg = make_cluster_config(replicas, threads);
  auto cluster = run_cluster(cfg, requests_from(mooncake(max_requests, 1.0)));
  // The same decisions on any number of threads (also a test: cluster_simulation_test).
  if (cluster.placement != serial.placement || cluster.ttft_s != serial.ttft_s) {
    fmt::print(stderr, "bench_cluster_speed: the cluster on {} threads disagrees with one thread\n", cluster.threads);
    return 1;
  }

  auto x = [](double sim, double wall) { return wall > 0 ? sim / wall : 0; };
  double single_x = x(single.simulated_seconds, single.wall_seconds);
  double cluster_x = x(cluster.simulated_seconds, cluster.wall_seconds);
  double single_rps = single.wall_seconds > 0 ? double(single.requests_total) / single.wall_seconds : 0;
  double cluster_rps = cluster.wall_seconds > 0 ? double(cluster.requests_total) / cluster.wall_seconds : 0;
  double serial_x = x(serial.simulated_seconds, serial.wall_seconds);
  fmt::print("{:<44} {:>10} {:>10} {:>12} {:>16}\n", "run", "sim s", "wall s", "x real time", "requests/wall s");
  fmt::print("{:<44} {:>10.1f} {:>10.2f} {:>12.0f} {:>16.0f}\n", "single node, trace stretched 3x (baseline)",
             single.simulated_seconds, single.wall_seconds, single_x, single_rps);
  fmt::print("{:<44} {:>10.1f} {:>10.2f} {:>12.0f} {:>16.0f}\n",
             fmt::format("{} replicas, recorded rate, 1 thread", replicas), serial.simulated_seconds,
             serial.wall_seconds, serial_x,
             serial.wall_seconds > 0 ? double(serial.requests_total) / serial.wall_seconds : 0);
  fmt::print("{:<44} {:>10.1f} {:>10.2f} {:>12.0f} {:>16.0f}\n",
             fmt::format("{} replicas, recorded rate, {} threads", replicas, cluster.threads),
             cluster.simulated_seconds, cluster.wall_seconds, cluster_x, cluster_rps);
  fmt::print("cluster on {} threads / on 1: {:.2f}x\n", cluster.threads,
             cluster.wall_seconds > 0 ? serial.wall_seconds / cluster.wall_seconds : 0);
  fmt::print("cluster / single node: {:.2f}x the requests per wall second, {:.2f}x the simulated seconds per wall "
             "second\n",
             single_rps > 0 ? cluster_rps / single_rps : 0, single_x > 0 ? cluster_x / single_x : 0);
  nlohmann::json j{
      {"bench", "cluster_speed"},
      {"requests", cluster.requests_total},
      {"single_node",
       {{"simulated_seconds", single.simulated_seconds},
        {"wall_seconds", single.wall_seconds},
        {"x_real_time", single_x},
        {"requests_per_wall_second", single_rps},
        {"completed", single.metrics.scheduler.requests_completed}}},
      {"cluster",
       {{"replicas", replicas},
        {"simulated_seconds", cluster.simulated_seconds},
        {"wall_seconds", cluster.wall_seconds},
        {"x_real_time", cluster_x},
        {"requests_per_wall_second", cluster_rps},
        {"completed", cluster.requests_completed},
        {"messages", cluster.messages},
        {"threads", cluster.threads},
        {"one_thread_wall_seconds", serial.wall_seconds},
        {"one_thread_x_real_time", serial_x}}},
      {"ratio_threads_over_one_thread", cluster.wall_seconds > 0 ? serial.wall_seconds / cluster.wall_seconds : 0},
      {"ratio_requests_per_wall_second", single_rps > 0 ? cluster_rps / single_rps : 0},
      {"ratio_x_real_time", single_x > 0 ? cluster_x / single_x : 0},
  };
  fmt::print("{}\n", j.dump(2));
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
    if (!f) {
      fmt::print(stderr, "bench_cluster_speed: cannot write {}\n", json_path);
      return 2;
    }
  }
  return 0;
}
