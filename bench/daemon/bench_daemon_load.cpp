// kvtierd under load, against redis-server holding the same blocks through
// hiredis, in the same run. Bounded and self-stopping, loopback only.
//
//   bench_daemon_load [--clients 1000] [--seconds 5] [--think-ms 20] [--json FILE] [--kvtierd PATH]
//
// Phases, each run on kvtierd and then on redis with the same clients, keys
// and bytes:
//   mixed     N clients, closed loop with think time: 60% exists of 64
//             hashes, 30% get of one block, 10% set of one block; p50/p99 per
//             operation; every get checked by checksum (a wrong block or a
//             preloaded block not found counts as an error).
//   exists64  N clients, no think time: batch_exists of 64 hashes; ops/s.
//   blocks2m  16 clients, 2 MiB blocks: get and set (fresh keys); GB/s.
// Both stores hold 4 GiB at most (kvtierd's DRAM tier, redis's maxmemory
// with allkeys-lru) and evict beyond it.
// kvtierd runs as a child process (a Unix socket in a temp folder), redis-server
// as another (a loopback port, no persistence).

#include "client/client.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using kvtier::client::block_key;

struct options {
  int clients = 1000;
  double seconds = 5;
  int think_ms = 20;
  std::string json;
  std::string kvtierd = KVTIERD_BINARY;
};

// Block content is a function of its key: any reader can check it.
void fill(std::byte* p, std::size_t bytes, std::uint64_t key) {
  std::uint64_t x = key * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}
block_key key_of(std::uint64_t k) {
  return {k + 1, 0x6b76};
}
std::string redis_key(std::uint64_t k) {
  return "kv:" + std::to_string(k);
}

pid_t spawn(std::vector<std::string> args, const std::string& log) {
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    pid = -1;
  if (pid < 0 && posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

double percentile(std::vector<float>& v, double p) {
  if (v.empty())
    return 0;
  const auto k = static_cast<std::size_t>(p * double(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

struct phase_result {
  std::uint64_t ops = 0, errors = 0, wrong = 0, lost = 0, bytes = 0;
  double seconds = 0;
  std::vector<float> exists_us, get_us, set_us;
  void merge(phase_result& o) {
    ops += o.ops;
    errors += o.errors;
    wrong += o.wrong;
    lost += o.lost;
    bytes += o.bytes;
    exists_us.insert(exists_us.end(), o.exists_us.begin(), o.exists_us.end());
    get_us.insert(get_us.end(), o.get_us.begin(), o.get_us.end());
    set_us.insert(set_us.end(), o.set_us.begin(), o.set_us.end());
  }
  nlohmann::json json() {
    return {{"ops", ops},
            {"ops_per_s", double(ops) / seconds},
            {"gb_per_s", double(bytes) / seconds / 1e9},
            {"errors", errors},
            {"wrong_blocks", wrong},
            {"lost_blocks", lost},
            {"exists_p50_us", percentile(exists_us, 0.5)},
            {"exists_p99_us", percentile(exists_us, 0.99)},
            {"get_p50_us", percentile(get_us, 0.5)},
            {"get_p99_us", percentile(get_us, 0.99)},
            {"set_p50_us", percentile(set_us, 0.5)},
            {"set_p99_us", percentile(set_us, 0.99)}};
  }
};

// One client's connection to either store, behind the same four calls.
class store_client {
public:
  virtual ~store_client() = default;
  virtual bool exists64(const std::vector<std::uint64_t>& keys, std::size_t& held) = 0;
  virtual bool get(std::uint64_t key, const std::byte*& data) = 0; // data: nullptr when not found
  virtual bool set(std::uint64_t key) = 0;                         // the block is in buffer()
  virtual std::byte* buffer() = 0;
};

class kvtier_client final : public store_client {
public:
  kvtier_client(const std::string& socket, std::size_t block) : block_(block) {
    auto c = kvtier::client::client::connect(socket, "bench", "bench");
    if (!c)
      throw std::runtime_error(c.err().what());
    c_.emplace(std::move(*c));
    auto r = c_->map_region(2 * block);
    if (!r)
      throw std::runtime_error(r.err().what());
    region_ = *r;
  }
  bool exists64(const std::vector<std::uint64_t>& keys, std::size_t& held) override {
    keys_.clear();
    for (auto k : keys)
      keys_.push_back(key_of(k));
    auto r = c_->batch_exists(keys_);
    held = r ? *r : 0;
    return bool(r);
  }
  bool get(std::uint64_t key, const std::byte*& data) override {
    const block_key k = key_of(key);
    const std::uint64_t off = block_;
    auto r = c_->batch_get(std::span(&k, 1), std::span(&off, 1));
    data = r && (*r)[0] ? region_->data() + block_ : nullptr;
    return bool(r);
  }
  bool set(std::uint64_t key) override {
    const block_key k = key_of(key);
    const std::uint64_t off = 0;
    auto r = c_->batch_set(std::span(&k, 1), std::span(&off, 1));
    return r && (*r)[0];
  }
  std::byte* buffer() override { return region_->data(); }

private:
  std::size_t block_;
  std::optional<kvtier::client::client> c_;
  kvtier::client::region* region_ = nullptr;
  std::vector<block_key> keys_;
};

class redis_client final : public store_client {
public:
  redis_client(int port, std::size_t block) : buf_(block) {
    c_ = redisConnect("127.0.0.1", port);
    if (!c_ || c_->err)
      throw std::runtime_error("redis connect");
  }
  ~redis_client() override {
    if (reply_)
      freeReplyObject(reply_);
    redisFree(c_);
  }
  bool exists64(const std::vector<std::uint64_t>& keys, std::size_t& held) override {
    // EXISTS k1 .. k64: one round trip, the count of keys present.
    std::vector<std::string> names{"EXISTS"};
    for (auto k : keys)
      names.push_back(redis_key(k));
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (auto& n : names) {
      argv.push_back(n.data());
      lens.push_back(n.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c_, int(argv.size()), argv.data(), lens.data()));
    if (!r)
      return false;
    held = r->type == REDIS_REPLY_INTEGER ? static_cast<std::size_t>(r->integer) : 0;
    freeReplyObject(r);
    return true;
  }
  bool get(std::uint64_t key, const std::byte*& data) override {
    if (reply_)
      freeReplyObject(reply_);
    const auto name = redis_key(key);
    reply_ = static_cast<redisReply*>(redisCommand(c_, "GET %b", name.data(), name.size()));
    if (!reply_)
      return false;
    data = reply_->type == REDIS_REPLY_STRING && reply_->len == buf_.size()
        ? reinterpret_cast<const std::byte*>(reply_->str)
        : nullptr;
    return true;
  }
  bool set(std::uint64_t key) override {
    const auto name = redis_key(key);
    auto* r =
        static_cast<redisReply*>(redisCommand(c_, "SET %b %b", name.data(), name.size(), buf_.data(), buf_.size()));
    const bool ok = r && r->type == REDIS_REPLY_STATUS;
    if (r)
      freeReplyObject(r);
    return ok;
  }
  std::byte* buffer() override { return buf_.data(); }

private:
  redisContext* c_ = nullptr;
  redisReply* reply_ = nullptr;
  std::vector<std::byte> buf_;
};

using factory = std::function<std::unique_ptr<store_client>()>;

// Stores keys [0, n) through one client.
void preload(store_client& c, std::size_t block, std::uint64_t n) {
  for (std::uint64_t k = 0; k < n; ++k) {
    fill(c.buffer(), block, k);
    if (!c.set(k))
      throw std::runtime_error("preload failed");
  }
}

enum class mix { mixed, exists_only, get_only, set_only };

// Runs `clients` threads for `seconds`; each builds its client, waits for the
// start, then loops. Keys [0, preloaded) are held; sets go to private keys.
phase_result run_phase(const factory& make, int clients, double seconds, int think_ms, std::size_t block,
                       std::uint64_t preloaded, mix m) {
  std::vector<phase_result> per(static_cast<std::size_t>(clients));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::byte> expected(block);
  std::vector<std::thread> threads;
  // Checksums of the preloaded blocks, computed once.
  std::vector<std::uint64_t> sums(preloaded);
  for (std::uint64_t k = 0; k < preloaded; ++k) {
    fill(expected.data(), block, k);
    sums[k] = XXH3_64bits(expected.data(), block);
  }
  for (int t = 0; t < clients; ++t)
    threads.emplace_back([&, t] {
      auto& r = per[static_cast<std::size_t>(t)];
      std::unique_ptr<store_client> c;
      try {
        c = make();
      } catch (...) {
        ++r.errors;
        ++ready;
        return;
      }
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7919 + 1);
      std::vector<std::uint64_t> keys(64);
      std::uint64_t own = 0;
      // Sets store fresh keys: a key kvtierd already holds would be
      // acknowledged without copying (same key, same bytes), which redis's
      // SET cannot know.
      const std::uint64_t own_base = 1'000'000 + static_cast<std::uint64_t>(t) * 10'000'000;
      fill(c->buffer(), block, own_base); // set payloads: checked only by size here
      ++ready;
      while (!go)
        std::this_thread::yield();
      while (!stop) {
        const auto dice = rng() % 10;
        const mix op = m != mix::mixed ? m : dice < 6 ? mix::exists_only : dice < 9 ? mix::get_only : mix::set_only;
        const auto t0 = clock_type::now();
        if (op == mix::exists_only) {
          const std::uint64_t start = rng() % (preloaded - 64);
          for (std::uint64_t i = 0; i < 64; ++i)
            keys[i] = start + i;
          std::size_t held = 0;
          if (!c->exists64(keys, held))
            ++r.errors;
          else if (held != 64)
            ++r.lost;
          r.exists_us.push_back(std::chrono::duration<float, std::micro>(clock_type::now() - t0).count());
        } else if (op == mix::get_only) {
          const std::uint64_t k = rng() % preloaded;
          const std::byte* data = nullptr;
          if (!c->get(k, data))
            ++r.errors;
          else if (!data)
            ++r.lost;
          else {
            r.get_us.push_back(std::chrono::duration<float, std::micro>(clock_type::now() - t0).count());
            if (XXH3_64bits(data, block) != sums[k])
              ++r.wrong;
            r.bytes += block;
          }
        } else {
          const std::uint64_t k = own_base + own++;
          if (!c->set(k))
            ++r.errors;
          r.set_us.push_back(std::chrono::duration<float, std::micro>(clock_type::now() - t0).count());
          r.bytes += block;
        }
        ++r.ops;
        if (think_ms > 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));
      }
    });
  while (ready < clients)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const auto t0 = clock_type::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads)
    th.join();
  phase_result total;
  total.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  for (auto& p : per)
    total.merge(p);
  return total;
}

struct daemon_child {
  pid_t pid = -1;
  std::string socket;
  ~daemon_child() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

void start_kvtierd(daemon_child& d, const std::string& binary, const fs::path& dir, const std::string& block,
                   const std::string& dram) {
  d.socket = (dir / ("d-" + block + ".sock")).string();
  const auto cfg = dir / ("d-" + block + ".toml");
  std::ofstream(cfg) << "[daemon]\nsocket = \"" << d.socket << "\"\nmetrics = \"\"\nblock_bytes = \"" << block
                     << "\"\nmax_sessions = 5000\n[dram]\nbytes = \"" << dram
                     << "\"\n[[tenant]]\nname = \"bench\"\ntoken = \"bench\"\n";
  d.pid = spawn({binary, cfg.string()}, (dir / ("kvtierd-" + block + ".log")).string());
  for (int i = 0; i < 12000 && !fs::exists(d.socket); ++i) // the DRAM tier is faulted in first
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (!fs::exists(d.socket))
    throw std::runtime_error("kvtierd did not start");
}

} // namespace

int main(int argc, char** argv) {
  options o;
  const char* usage = "usage: bench_daemon_load [--clients N] [--seconds S] [--think-ms MS] [--json FILE] "
                      "[--kvtierd PATH]\n";
  for (int i = 1; i < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      fmt::print("{}", usage);
      return 0;
    }
    if (i + 1 == argc) {
      fmt::print(stderr, "bench_daemon_load: {} needs a value\n{}", a, usage);
      return 2;
    }
    const std::string v = argv[i + 1];
    if (a == "--clients")
      o.clients = std::stoi(v);
    else if (a == "--seconds")
      o.seconds = std::stod(v);
    else if (a == "--think-ms")
      o.think_ms = std::stoi(v);
    else if (a == "--json")
      o.json = v;
    else if (a == "--kvtierd")
      o.kvtierd = v;
    else {
      fmt::print(stderr, "bench_daemon_load: unknown flag {}\n{}", a, usage);
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  const fs::path dir = fs::temp_directory_path() / ("bench-daemon-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // redis-server on a loopback port, nothing persisted.
  const int port = 20000 + ::getpid() % 20000;
  const pid_t redis = spawn({"redis-server", "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--maxclients", "5000", "--protected-mode", "no", "--maxmemory",
                             "4gb", "--maxmemory-policy", "allkeys-lru"},
                            (dir / "redis.log").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  nlohmann::json out;
  out["clients"] = o.clients;
  out["seconds_per_phase"] = o.seconds;
  out["think_ms"] = o.think_ms;
  out["cores"] = std::thread::hardware_concurrency();
  int rc = 0;
  try {
    // Mixed load and exists64: 32 KiB blocks, 8192 preloaded.
    constexpr std::size_t small = 32 * 1024;
    constexpr std::uint64_t small_n = 8192;
    {
      daemon_child d;
      start_kvtierd(d, o.kvtierd, dir, "32KiB", "2GiB");
      const factory kv = [&] { return std::make_unique<kvtier_client>(d.socket, small); };
      const factory rd = [&] { return std::make_unique<redis_client>(port, small); };
      preload(*kv(), small, small_n);
      preload(*rd(), small, small_n);
      for (auto [name, f] : {std::pair{"kvtierd", kv}, std::pair{"redis", rd}}) {
        auto mixed = run_phase(f, o.clients, o.seconds, o.think_ms, small, small_n, mix::mixed);
        out["mixed"][name] = mixed.json();
        auto ex = run_phase(f, o.clients, o.seconds, 0, small, small_n, mix::exists_only);
        out["exists64"][name] = ex.json();
      }
    }
    // 2 MiB blocks: 16 clients, get and set, 256 blocks preloaded.
    constexpr std::size_t big = 2 << 20;
    constexpr std::uint64_t big_n = 256;
    {
      daemon_child d;
      start_kvtierd(d, o.kvtierd, dir, "2MiB", "4GiB");
      const factory kv = [&] { return std::make_unique<kvtier_client>(d.socket, big); };
      const factory rd = [&] { return std::make_unique<redis_client>(port, big); };
      preload(*kv(), big, big_n);
      preload(*rd(), big, big_n);
      for (auto [name, f] : {std::pair{"kvtierd", kv}, std::pair{"redis", rd}}) {
        out["get_2mib"][name] = run_phase(f, 16, o.seconds, 0, big, big_n, mix::get_only).json();
        out["set_2mib"][name] = run_phase(f, 16, o.seconds, 0, big, big_n, mix::set_only).json();
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_daemon_load: {}\n", e.what());
    rc = 1;
  }
  ::kill(redis, SIGTERM);
  ::waitpid(redis, nullptr, 0);
  fs::remove_all(dir);
  if (rc)
    return rc;

  auto ratio = [&](const char* phase, const char* field) {
    const double r = out[phase]["redis"][field].get<double>();
    return r > 0 ? out[phase]["kvtierd"][field].get<double>() / r : 0.0;
  };
  out["ratio_get_2mib_gb_per_s"] = ratio("get_2mib", "gb_per_s");
  out["ratio_set_2mib_gb_per_s"] = ratio("set_2mib", "gb_per_s");
  out["ratio_exists64_ops_per_s"] = ratio("exists64", "ops_per_s");
  std::uint64_t bad = 0;
  for (const char* phase : {"mixed", "exists64", "get_2mib", "set_2mib"})
    for (const char* who : {"kvtierd", "redis"})
      bad += out[phase][who]["errors"].get<std::uint64_t>() + out[phase][who]["wrong_blocks"].get<std::uint64_t>() +
          out[phase][who]["lost_blocks"].get<std::uint64_t>();
  out["errors_lost_wrong"] = bad;

  fmt::print("kvtierd vs redis-server (hiredis), loopback, {} clients, {} s per phase, {} cores\n", o.clients,
             o.seconds, std::thread::hardware_concurrency());
  fmt::print("{:<10} {:<8} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n", "phase", "store", "ops/s",
             "GB/s", "exists p50", "exists p99", "get p50", "get p99", "set p50", "set p99", "errors");
  for (const char* phase : {"mixed", "exists64", "get_2mib", "set_2mib"})
    for (const char* who : {"kvtierd", "redis"}) {
      const auto& p = out[phase][who];
      fmt::print(
          "{:<10} {:<8} {:>12.0f} {:>9.2f} {:>8.0f}us {:>8.0f}us {:>8.0f}us {:>8.0f}us {:>8.0f}us {:>8.0f}us {:>7}\n",
          phase, who, p["ops_per_s"].get<double>(), p["gb_per_s"].get<double>(), p["exists_p50_us"].get<double>(),
          p["exists_p99_us"].get<double>(), p["get_p50_us"].get<double>(), p["get_p99_us"].get<double>(),
          p["set_p50_us"].get<double>(), p["set_p99_us"].get<double>(),
          p["errors"].get<std::uint64_t>() + p["wrong_blocks"].get<std::uint64_t>() +
              p["lost_blocks"].get<std::uint64_t>());
    }
  fmt::print("ratios kvtierd/redis: get 2 MiB GB/s {:.2f}x (goal >= 5), set 2 MiB GB/s {:.2f}x, exists64 ops/s "
             "{:.2f}x (goal >= 2); mixed exists p99 {:.0f} us (goal <= 1000); errors+lost+wrong {}\n",
             out["ratio_get_2mib_gb_per_s"].get<double>(), out["ratio_set_2mib_gb_per_s"].get<double>(),
             out["ratio_exists64_ops_per_s"].get<double>(), out["mixed"]["kvtierd"]["exists_p99_us"].get<double>(),
             bad);
  fmt::print("{}\n", out.dump());
  if (!o.json.empty())
    std::ofstream(o.json) << out.dump(2) << "\n";
  return bad == 0 ? 0 : 1;
}
