// bench/redis_throughput: KV blocks through the remote tier against
// redis-benchmark's own SET and GET of values of the same size, pipelined as
// deep, on the same redis-server (started here on a free loopback port), in
// one run. Two ways through kvtier: the engine (remote/'s redis_block_store:
// pipelined SET/GET of checksummed values, a callback per job) and the tier
// as `kvtier run` uses it (real/'s remote_page_store behind the page-store
// seam, each job's completion a CAF message to an actor, `--in-flight` jobs
// outstanding as the transfer engine keeps them). Prints blocks/s and GB/s
// each way, the ratios, and JSON (also to --json FILE).
//
//   bench_redis_throughput [--block-kib N] [--blocks N] [--pipeline N] [--in-flight N] [--json FILE]

#include "real/remote_page_store.hpp"
#include "remote/redis_block_store.hpp"
#include "runtime/error.hpp"

#include <caf/all.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using namespace kvtier;

namespace {

uint16_t free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// requests/s of one redis-benchmark test ("SET" or "GET"), from its CSV output.
double redis_benchmark_rps(uint16_t port, const char* test, uint64_t bytes, uint64_t n, uint32_t pipeline) {
  auto cmd = fmt::format("redis-benchmark -h 127.0.0.1 -p {} -t {} -d {} -n {} -P {} -c 1 --csv 2>/dev/null", port,
                         test, bytes, n, pipeline);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p)
    return 0;
  char line[512];
  double rps = 0;
  while (fgets(line, sizeof line, p)) {
    std::string s(line);
    auto first = s.find("\",\"");
    if (s.rfind("\"" + std::string(test), 0) == 0 && first != std::string::npos)
      rps = std::stod(s.substr(first + 3));
  }
  pclose(p);
  return rps;
}

} // namespace

int main(int argc, char** argv) {
  uint64_t block_kib = 2048, blocks = 512;
  uint32_t pipeline = 16, in_flight = 4;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help") {
      fmt::print(
          "usage: bench_redis_throughput [--block-kib N] [--blocks N] [--pipeline N] [--in-flight N] [--json FILE]\n");
      return 0;
    }
    if (i + 1 >= argc) {
      fmt::print(stderr, "bench_redis_throughput: {} needs a value\n", arg);
      return 2;
    }
    if (arg == "--block-kib")
      block_kib = std::stoull(argv[++i]);
    else if (arg == "--blocks")
      blocks = std::stoull(argv[++i]);
    else if (arg == "--pipeline")
      pipeline = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (arg == "--in-flight")
      in_flight = std::max(1u, static_cast<uint32_t>(std::stoul(argv[++i])));
    else if (arg == "--json")
      json_path = argv[++i];
    else {
      fmt::print(stderr, "bench_redis_throughput: unknown flag {}\n", arg);
      return 2;
    }
  }
  if (access("/usr/bin/redis-server", X_OK) != 0) {
    fmt::print(stderr, "bench_redis_throughput: redis-server is not installed (Debian: redis-server)\n");
    return 2;
  }
  uint16_t port = free_port();
  auto port_text = std::to_string(port);
  std::vector<std::string> args{
      "/usr/bin/redis-server", "--port", port_text,   "--bind",   "127.0.0.1", "--save", "", "--appendonly", "no",
      "--proto-max-bulk-len",  "1gb",    "--logfile", "/dev/null"};
  std::vector<char*> av;
  for (auto& a : args)
    av.push_back(a.data());
  av.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, av[0], nullptr, nullptr, av.data(), environ) != 0) {
    fmt::print(stderr, "bench_redis_throughput: cannot start redis-server\n");
    return 2;
  }
  const uint64_t B = block_kib * 1024;
  const uint32_t slots = pipeline;
  std::vector<std::byte> memory(uint64_t{slots} * in_flight * B); // the seam pass keeps in_flight jobs of slots each
  for (size_t i = 0; i < memory.size(); ++i)
    memory[i] = std::byte(static_cast<uint8_t>(i * 2654435761u >> 13));
  io::dram_region region{memory.data(), tier_layout{slot_order::block_major, slots * in_flight, 1, B}};
  remote::redis_options o;
  o.port = port;
  std::unique_ptr<remote::redis_block_store> store;
  caf::error last;
  for (int i = 0; i < 300 && !store; ++i) {
    if (auto s = remote::redis_block_store::connect(o, region))
      store = std::move(*s);
    else {
      last = s.error();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (!store) {
    fmt::print(stderr, "bench_redis_throughput: {}\n", describe(last));
    kill(pid, SIGKILL);
    return 2;
  }
  // One job per `pipeline` blocks, one after the other: each job's blocks
  // go out pipelined on the store's one connection.
  auto pass = [&](page_op op) {
    auto start = std::chrono::steady_clock::now();
    uint64_t failed = 0;
    for (uint64_t first = 0; first < blocks; first += slots) {
      page_job job;
      job.op = op;
      for (uint64_t b = first; b < std::min(blocks, first + slots); ++b)
        job.pages.push_back({static_cast<uint32_t>(b - first), 0, block_hash{b + 1, 17}, 0});
      std::promise<io::job_result> done;
      store->submit(std::move(job), [&](io::job_result r) { done.set_value(std::move(r)); });
      auto r = done.get_future().get();
      for (auto& e : r.pages)
        failed += e ? 1 : 0;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::pair{static_cast<double>(blocks) / s, failed};
  };
  auto [write_bps, write_failed] = pass(page_op::write);
  auto [read_bps, read_failed] = pass(page_op::read);
  store.reset();

  // The tier as a real run uses it: behind the seam, completions as messages,
  // in_flight jobs outstanding. Its own keys (salt 1), so reads find its writes.
  remote_config rc;
  rc.kind = remote_kind::redis;
  rc.port = port;
  auto seam_store = remote_page_store::open(rc, 0, region);
  if (!seam_store) {
    fmt::print(stderr, "bench_redis_throughput: {}\n", describe(seam_store.error()));
    kill(pid, SIGKILL);
    return 2;
  }
  caf::actor_system_config sys_cfg;
  sys_cfg.set("logger.verbosity", caf::atom("quiet"));
  caf::actor_system system{sys_cfg};
  auto seam_pass = [&](page_op op) {
    caf::scoped_actor self{system};
    auto start = std::chrono::steady_clock::now();
    uint64_t failed = 0, outstanding = 0, next = 0;
    auto wait_one = [&] {
      self->receive([&](completion_atom, uint64_t, uint64_t bytes, const caf::error& err) {
        failed += err ? 1 : 0;
        (void)bytes;
      });
      --outstanding;
    };
    while (next < blocks) {
      if (outstanding == in_flight)
        wait_one();
      uint32_t lane = static_cast<uint32_t>((next / slots) % in_flight); // a job's slots are free once it completed
      page_job job;
      job.op = op;
      job.tag = next;
      for (uint64_t b = next; b < std::min(blocks, next + slots); ++b)
        job.pages.push_back({lane * slots + static_cast<uint32_t>(b - next), 0, block_hash{b + 1, 17}, 1});
      next += slots;
      (*seam_store)->submit(std::move(job), caf::actor{self});
      ++outstanding;
    }
    while (outstanding > 0)
      wait_one();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::pair{static_cast<double>(blocks) / s, failed};
  };
  auto [seam_write_bps, seam_write_failed] = seam_pass(page_op::write);
  auto [seam_read_bps, seam_read_failed] = seam_pass(page_op::read);
  seam_store->reset();
  double set_rps = redis_benchmark_rps(port, "SET", B, blocks, pipeline);
  double get_rps = redis_benchmark_rps(port, "GET", B, blocks, pipeline);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);

  auto gbps = [&](double per_s) { return per_s * static_cast<double>(B) / 1e9; };
  fmt::print("{} blocks of {} KiB, pipeline {}, one connection, redis-server on loopback\n", blocks, block_kib,
             pipeline);
  fmt::print("{:<34} {:>12} {:>9} {:>12} {:>9} {:>8}\n", "", "kvtier /s", "GB/s", "redis-bench", "GB/s", "ratio");
  fmt::print("{:<34} {:>12.0f} {:>9.2f} {:>12.0f} {:>9.2f} {:>8.2f}\n", "write (SET, checksummed value)", write_bps,
             gbps(write_bps), set_rps, gbps(set_rps), set_rps > 0 ? write_bps / set_rps : 0);
  fmt::print("{:<34} {:>12.0f} {:>9.2f} {:>12.0f} {:>9.2f} {:>8.2f}\n", "read (GET, checked, copied)", read_bps,
             gbps(read_bps), get_rps, gbps(get_rps), get_rps > 0 ? read_bps / get_rps : 0);
  fmt::print("{:<34} {:>12.0f} {:>9.2f} {:>12.0f} {:>9.2f} {:>8.2f}\n", "write through the tier (seam)", seam_write_bps,
             gbps(seam_write_bps), set_rps, gbps(set_rps), set_rps > 0 ? seam_write_bps / set_rps : 0);
  fmt::print("{:<34} {:>12.0f} {:>9.2f} {:>12.0f} {:>9.2f} {:>8.2f}\n", "read through the tier (seam)", seam_read_bps,
             gbps(seam_read_bps), get_rps, gbps(get_rps), get_rps > 0 ? seam_read_bps / get_rps : 0);
  nlohmann::json j{
      {"bench", "redis_throughput"},
      {"block_bytes", B},
      {"blocks", blocks},
      {"pipeline", pipeline},
      {"kvtier",
       {{"write_blocks_per_s", write_bps},
        {"read_blocks_per_s", read_bps},
        {"write_gbps", gbps(write_bps)},
        {"read_gbps", gbps(read_bps)},
        {"failed_writes", write_failed},
        {"failed_reads", read_failed}}},
      {"through_the_tier",
       {{"in_flight_jobs", in_flight},
        {"write_blocks_per_s", seam_write_bps},
        {"read_blocks_per_s", seam_read_bps},
        {"write_gbps", gbps(seam_write_bps)},
        {"read_gbps", gbps(seam_read_bps)},
        {"failed_write_jobs", seam_write_failed},
        {"failed_read_jobs", seam_read_failed}}},
      {"redis_benchmark",
       {{"set_per_s", set_rps}, {"get_per_s", get_rps}, {"set_gbps", gbps(set_rps)}, {"get_gbps", gbps(get_rps)}}},
      {"ratio_write", set_rps > 0 ? write_bps / set_rps : 0},
      {"ratio_read", get_rps > 0 ? read_bps / get_rps : 0},
      {"ratio_tier_write", set_rps > 0 ? seam_write_bps / set_rps : 0},
      {"ratio_tier_read", get_rps > 0 ? seam_read_bps / get_rps : 0}};
  fmt::print("{}\n", j.dump(2));
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << j.dump(2) << "\n";
    if (!f)
      return 2;
  }
  return write_failed + read_failed + seam_write_failed + seam_read_failed == 0 ? 0 : 1;
}
