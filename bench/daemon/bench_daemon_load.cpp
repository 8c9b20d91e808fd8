// kvtierd under load, against redis-server holding the same blocks, in the
// same run and through the same load generator. Bounded and self-stopping,
// loopback only.
//
//   bench_daemon_load [--clients 1000] [--seconds 5] [--think-ms 20] [--think exponential|fixed]
//                     [--loops 1] [--copy-threads 2]
//                     [--json FILE] [--kvtierd PATH] [--redis-server PATH]
//                     [--phases mixed,exists64,bulk] [--server-cpus 0-1] [--load-cpus 2-15]
//
// The generator holds every connection on `--loops` threads (epoll, one
// request outstanding per connection), so the clients cost the machine a
// thread or two, not a thread each: what is measured is the stores.
// Phases, each run on kvtierd and then on redis with the same connections'
// keys and bytes:
//   mixed     N clients, closed loop with think time (--think: exponential
//             with mean --think-ms, each client's first request after one
//             such draw, as independent users send; or fixed --think-ms with
//             every client starting at once, which keeps the clients in
//             step, so requests arrive in bursts): 60% exists of 64
//             hashes, 30% get of one block, 10% set of one block; p50/p99/
//             p999 per operation; every get checked by checksum (a wrong
//             block or a preloaded block not found counts as an error).
//   exists64  N clients, no think time: batch_exists of 64 hashes; ops/s.
//   blocks2m  16 clients, 2 MiB blocks: get and set (fresh keys); GB/s.
//   exists_under_bulk  N clients, 2 MiB blocks: 16 get blocks without
//             think time, the others send exists of 64 with think time: does
//             a control request wait behind bulk copies?
// Client-side latency is request sent to reply parsed. For kvtierd the
// phase also reports the daemon's own view from /metrics: service time per
// operation, how late its io thread ran (queueing), and where its CPU went.
// Both stores hold 4 GiB at most (kvtierd's DRAM tier, redis's maxmemory
// with allkeys-lru) and evict beyond it.
// kvtierd runs as a child process (a Unix socket in a temp folder), redis-server
// as another (a loopback port, no persistence). --server-cpus pins both
// stores to those CPUs and --load-cpus the generator to its own, so the
// stores do not share cores with the load that measures them.
// The daemon's cost per operation is its io thread's CPU seconds over the
// phase's operations (from /metrics): a measure the scheduler's noise does
// not move, unlike ops/s on a shared machine.

#include "client/region.hpp"
#include "client/wire.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <queue>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using kvtier::client::block_key;
namespace wire = kvtier::wire;

struct options {
  int clients = 1000;
  double seconds = 5;
  int think_ms = 20;
  bool think_fixed = false; // --think fixed: every client thinks exactly think_ms
  int loops = 1;
  int copy_threads = 2; // kvtierd's [daemon] copy_threads
  std::string json;
  std::string kvtierd = KVTIERD_BINARY;
  std::string redis_server = "redis-server";
  std::vector<std::string> phases{"mixed", "exists64", "bulk"};
  std::string server_cpus, load_cpus; // empty: wherever the scheduler puts them
};

// "0-1", "2,3,8-15" -> a CPU set; nullopt for anything else.
std::optional<cpu_set_t> parse_cpus(const std::string& list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::istringstream in(list);
  int n = 0;
  for (std::string part; std::getline(in, part, ',');) {
    const auto dash = part.find('-');
    int lo = 0, hi = 0;
    try {
      std::size_t used = 0;
      lo = std::stoi(part.substr(0, dash), &used);
      if (used != (dash == std::string::npos ? part.size() : dash))
        return std::nullopt;
      hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1), &used);
      if (dash != std::string::npos && used != part.size() - dash - 1)
        return std::nullopt;
    } catch (...) {
      return std::nullopt;
    }
    if (lo < 0 || hi < lo || hi >= CPU_SETSIZE)
      return std::nullopt;
    for (int c = lo; c <= hi; ++c, ++n)
      CPU_SET(c, &set);
  }
  if (n == 0)
    return std::nullopt;
  return set;
}

// Children spawned while this is set run on these CPUs (a spawned process
// inherits the spawning thread's affinity).
std::optional<cpu_set_t> server_cpus;

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
  cpu_set_t own;
  if (server_cpus) {
    ::sched_getaffinity(0, sizeof own, &own);
    ::sched_setaffinity(0, sizeof *server_cpus, &*server_cpus);
  }
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    pid = -1;
  if (pid < 0 && posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0)
    pid = -1;
  if (server_cpus)
    ::sched_setaffinity(0, sizeof own, &own);
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
  nlohmann::json server; // kvtierd's own view of the phase (/metrics deltas)
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
    nlohmann::json j{{"ops", ops},
                     {"ops_per_s", double(ops) / seconds},
                     {"gb_per_s", double(bytes) / seconds / 1e9},
                     {"errors", errors},
                     {"wrong_blocks", wrong},
                     {"lost_blocks", lost}};
    for (auto [name, v] : {std::pair{"exists", &exists_us}, std::pair{"get", &get_us}, std::pair{"set", &set_us}}) {
      j[fmt::format("{}_p50_us", name)] = percentile(*v, 0.5);
      j[fmt::format("{}_p99_us", name)] = percentile(*v, 0.99);
      j[fmt::format("{}_p999_us", name)] = percentile(*v, 0.999);
    }
    if (!server.is_null())
      j["server"] = server;
    return j;
  }
};

enum class mix { mixed, exists_only, get_only, set_only };

// One connection's wire protocol, non-blocking: a request is bytes to send,
// a reply is parsed from whatever bytes arrived.
class store_conn {
public:
  virtual ~store_conn() = default;
  int fd() const { return fd_; }
  /// The request's bytes: exists of 64 keys, get of one key, set of one key
  /// (the set's block is in the connection's buffer).
  virtual void request(mix op, const std::vector<std::uint64_t>& keys, std::string& out) = 0;
  /// Feeds received bytes; true once the reply is whole. `ok` false: an
  /// error reply; `count`: exists's hits, or 1 when a get found / a set stored.
  virtual bool feed(const char* p, std::size_t n, bool& ok, std::size_t& count) = 0;
  /// The block a get returned (valid after feed reported it found).
  virtual const std::byte* got() const = 0;
  /// Where a set's block is taken from.
  virtual std::byte* buffer() = 0;

protected:
  int fd_ = -1;
};

void set_nonblocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void send_all(int fd, const void* p, std::size_t n, int pass_fd = -1) {
  const char* at = static_cast<const char*>(p);
  while (n > 0) {
    iovec iov{const_cast<char*>(at), n};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (pass_fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
      pass_fd = -1;
    }
    const ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent <= 0)
      throw std::runtime_error(std::string("send: ") + std::strerror(errno));
    at += sent;
    n -= static_cast<std::size_t>(sent);
  }
}

// kvtierd's frames (client/wire.hpp), the region a memfd passed at setup.
class kvtier_conn final : public store_conn {
public:
  kvtier_conn(const std::string& socket, std::size_t block) : block_(block) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect to kvtierd: " + std::string(std::strerror(errno)));
    wire::request hello;
    hello.kind = wire::op::hello;
    hello.tenant = hello.token = "bench";
    blocking_call(hello, -1);
    auto r = kvtier::client::region::create(2 * block);
    if (!r)
      throw std::runtime_error(r.err().what());
    region_.emplace(std::move(*r));
    wire::request map;
    map.kind = wire::op::map_region;
    map.region_bytes = region_->size();
    blocking_call(map, region_->fd());
    set_nonblocking(fd_);
  }
  ~kvtier_conn() override { ::close(fd_); }
  std::byte* buffer() override { return region_->data(); }
  void request(mix op, const std::vector<std::uint64_t>& keys, std::string& out) override {
    wire::request q;
    q.id = ++id_;
    q.kind = op == mix::exists_only ? wire::op::exists : op == mix::get_only ? wire::op::get : wire::op::set;
    for (auto k : keys)
      q.keys.push_back(key_of(k));
    if (op != mix::exists_only)
      q.offsets.push_back(op == mix::get_only ? block_ : 0);
    const auto frame = wire::encode_request(q);
    out.assign(reinterpret_cast<const char*>(frame.data()), frame.size());
    in_.clear();
  }
  bool feed(const char* p, std::size_t n, bool& ok, std::size_t& count) override {
    in_.append(p, n);
    if (in_.size() < wire::header_bytes)
      return false;
    auto h = wire::decode_header(std::span<const std::byte, wire::header_bytes>(
                                     reinterpret_cast<const std::byte*>(in_.data()), wire::header_bytes),
                                 1u << 30);
    if (!h)
      throw std::runtime_error("kvtierd sent a bad header: " + h.err().message);
    if (in_.size() < wire::header_bytes + h->length)
      return false;
    auto r = wire::decode_reply(
        *h, std::span(reinterpret_cast<const std::byte*>(in_.data()) + wire::header_bytes, h->length));
    ok = r && r->status == kvtier::client::errc::ok && h->request_id == id_;
    count = 0;
    if (ok) {
      std::uint32_t v = 0;
      std::memcpy(&v, r->body.data(), 4);
      const auto kind = static_cast<wire::op>(h->op & ~wire::reply_bit);
      count = kind == wire::op::exists ? v : r->body.size() > 4 && r->body[4] != std::byte{0} ? 1 : 0;
    }
    return true;
  }
  const std::byte* got() const override { return region_->data() + block_; }

private:
  void blocking_call(wire::request q, int pass_fd) {
    q.id = ++id_;
    const auto frame = wire::encode_request(q);
    send_all(fd_, frame.data(), frame.size(), pass_fd);
    bool ok = false;
    std::size_t count = 0;
    char buf[4096];
    for (;;) {
      const ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
      if (got <= 0)
        throw std::runtime_error("kvtierd closed the connection at setup");
      if (feed(buf, static_cast<std::size_t>(got), ok, count))
        break;
    }
    in_.clear();
    if (!ok)
      throw std::runtime_error(std::string("kvtierd refused ") + wire::to_string(q.kind));
  }
  std::size_t block_;
  std::optional<kvtier::client::region> region_;
  std::string in_;
  std::uint64_t id_ = 0;
};

// redis's RESP through hiredis's formatter and reader: EXISTS of 64 keys,
// GET, SET.
class redis_conn final : public store_conn {
public:
  redis_conn(int port, std::size_t block) : block_(block), buf_(block) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("connect to redis: " + std::string(std::strerror(errno)));
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    set_nonblocking(fd_);
    reader_ = redisReaderCreate();
    reader_->maxbuf = 0; // keep the buffer between 2 MiB replies
  }
  ~redis_conn() override {
    if (reply_)
      freeReplyObject(reply_);
    redisReaderFree(reader_);
    ::close(fd_);
  }
  std::byte* buffer() override { return buf_.data(); }
  void request(mix op, const std::vector<std::uint64_t>& keys, std::string& out) override {
    std::vector<std::string> names{op == mix::exists_only ? "EXISTS" : op == mix::get_only ? "GET" : "SET"};
    for (auto k : keys)
      names.push_back(redis_key(k));
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (auto& n : names) {
      argv.push_back(n.data());
      lens.push_back(n.size());
    }
    if (op == mix::set_only) {
      argv.push_back(reinterpret_cast<const char*>(buf_.data()));
      lens.push_back(buf_.size());
    }
    char* cmd = nullptr;
    const int len = redisFormatCommandArgv(&cmd, int(argv.size()), argv.data(), lens.data());
    out.assign(cmd, static_cast<std::size_t>(len));
    redisFreeCommand(cmd);
    op_ = op;
  }
  bool feed(const char* p, std::size_t n, bool& ok, std::size_t& count) override {
    redisReaderFeed(reader_, p, n);
    if (reply_)
      freeReplyObject(reply_);
    reply_ = nullptr;
    void* r = nullptr;
    if (redisReaderGetReply(reader_, &r) != REDIS_OK)
      throw std::runtime_error("redis sent a malformed reply");
    if (!r)
      return false;
    reply_ = static_cast<redisReply*>(r);
    ok = reply_->type != REDIS_REPLY_ERROR;
    count = op_ == mix::exists_only ? (reply_->type == REDIS_REPLY_INTEGER ? std::size_t(reply_->integer) : 0)
        : op_ == mix::get_only      ? (reply_->type == REDIS_REPLY_STRING && std::size_t(reply_->len) == block_)
                                    : reply_->type == REDIS_REPLY_STATUS;
    return true;
  }
  const std::byte* got() const override { return reinterpret_cast<const std::byte*>(reply_->str); }

private:
  std::size_t block_;
  std::vector<std::byte> buf_;
  redisReader* reader_ = nullptr;
  redisReply* reply_ = nullptr;
  mix op_ = mix::exists_only;
};

struct store_target {
  std::string kvtier_socket; // empty: redis at redis_port
  int redis_port = 0;
  std::unique_ptr<store_conn> connect(std::size_t block, std::uint64_t payload_key) const {
    std::unique_ptr<store_conn> c;
    if (!kvtier_socket.empty())
      c = std::make_unique<kvtier_conn>(kvtier_socket, block);
    else
      c = std::make_unique<redis_conn>(redis_port, block);
    fill(c->buffer(), block, payload_key);
    return c;
  }
};

// Stores keys [0, n) through one connection, a request at a time.
void preload(const store_target& target, std::size_t block, std::uint64_t n) {
  auto c = target.connect(block, 0);
  std::string req;
  std::vector<char> buf(1 << 16);
  for (std::uint64_t k = 0; k < n; ++k) {
    fill(c->buffer(), block, k);
    c->request(mix::set_only, {k}, req);
    std::size_t at = 0;
    while (at < req.size()) {
      const ssize_t sent = ::send(c->fd(), req.data() + at, req.size() - at, MSG_NOSIGNAL);
      if (sent > 0)
        at += static_cast<std::size_t>(sent);
      else if (errno != EAGAIN)
        throw std::runtime_error("preload: send failed");
    }
    bool ok = false, whole = false;
    std::size_t count = 0;
    while (!whole) {
      const ssize_t got = ::recv(c->fd(), buf.data(), buf.size(), 0);
      if (got > 0)
        whole = c->feed(buf.data(), static_cast<std::size_t>(got), ok, count);
      else if (got == 0 || errno != EAGAIN)
        throw std::runtime_error("preload: the store closed the connection");
    }
    if (!ok || count != 1)
      throw std::runtime_error("preload failed");
  }
}

// `clients` connections driven by `loops` threads, each with an epoll over
// its share: a connection sends a request, waits for its reply, thinks
// `think_ms`, sends the next (a closed loop per connection, as a blocking
// client thread would, without a thread per client). Keys [0, preloaded)
// are held; sets go to private keys. Latency is client side: request sent
// to reply parsed.
// The first `bulk` connections instead get blocks without thinking: the bulk
// copies other requests may queue behind (gets, not sets: sets of fresh keys
// would evict the preloaded blocks the others ask about).
phase_result run_phase(const store_target& target, int clients, int loops, double seconds, int think_ms,
                       bool think_fixed, std::size_t block, std::uint64_t preloaded, mix m, int bulk = 0) {
  std::vector<std::uint64_t> sums(preloaded);
  {
    std::vector<std::byte> expected(block);
    for (std::uint64_t k = 0; k < preloaded; ++k) {
      fill(expected.data(), block, k);
      sums[k] = XXH3_64bits(expected.data(), block);
    }
  }
  struct client_state {
    std::unique_ptr<store_conn> conn;
    std::mt19937_64 rng;
    std::uint64_t own_base = 0, own = 0, key = 0;
    mix op = mix::exists_only;
    std::string out;
    std::size_t sent = 0;
    clock_type::time_point t0;
    bool waiting_write = false;
    bool bulk = false;
  };
  std::vector<client_state> cs(static_cast<std::size_t>(clients));
  for (int t = 0; t < clients; ++t) {
    auto& c = cs[static_cast<std::size_t>(t)];
    // Sets store fresh keys: a key kvtierd already holds would be
    // acknowledged without copying (same key, same bytes), which redis's SET
    // cannot know.
    c.own_base = 1'000'000 + static_cast<std::uint64_t>(t) * 10'000'000;
    c.rng.seed(static_cast<std::uint64_t>(t) * 7919 + 1);
    c.bulk = t < bulk;
    c.conn = target.connect(block, c.own_base); // set payloads: checked only by size here
  }
  std::vector<phase_result> per(static_cast<std::size_t>(loops));
  const auto begin = clock_type::now();
  const auto end = begin + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds));
  auto loop = [&](int l) {
    auto& r = per[static_cast<std::size_t>(l)];
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    using wake = std::pair<clock_type::time_point, client_state*>;
    std::priority_queue<wake, std::vector<wake>, std::greater<>> due; // earliest first
    std::exponential_distribution<double> think_draw(1.0 / std::max(think_ms, 1));
    auto think_for = [&](client_state& c) {
      return std::chrono::duration_cast<clock_type::duration>(
          std::chrono::duration<double, std::milli>(think_fixed ? double(think_ms) : think_draw(c.rng)));
    };
    std::vector<std::uint64_t> keys;
    std::size_t outstanding = 0;
    auto try_send = [&](client_state& c) {
      while (c.sent < c.out.size()) {
        const ssize_t n = ::send(c.conn->fd(), c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (n > 0) {
          c.sent += static_cast<std::size_t>(n);
          continue;
        }
        if (errno == EAGAIN) {
          if (!c.waiting_write) {
            epoll_event e{EPOLLIN | EPOLLOUT, {.ptr = &c}};
            ::epoll_ctl(ep, EPOLL_CTL_MOD, c.conn->fd(), &e);
            c.waiting_write = true;
          }
          return;
        }
        throw std::runtime_error("send failed");
      }
      if (c.waiting_write) {
        epoll_event e{EPOLLIN, {.ptr = &c}};
        ::epoll_ctl(ep, EPOLL_CTL_MOD, c.conn->fd(), &e);
        c.waiting_write = false;
      }
    };
    auto start = [&](client_state& c) {
      const auto dice = c.rng() % 10;
      c.op = c.bulk         ? mix::get_only
          : m != mix::mixed ? m
          : dice < 6        ? mix::exists_only
          : dice < 9        ? mix::get_only
                            : mix::set_only;
      keys.clear();
      if (c.op == mix::exists_only) {
        const std::uint64_t first = c.rng() % (preloaded - 64);
        for (std::uint64_t i = 0; i < 64; ++i)
          keys.push_back(first + i);
      } else if (c.op == mix::get_only) {
        c.key = c.rng() % preloaded;
        keys.push_back(c.key);
      } else {
        keys.push_back(c.own_base + c.own++);
      }
      c.conn->request(c.op, keys, c.out);
      c.sent = 0;
      ++outstanding;
      c.t0 = clock_type::now();
      try_send(c);
    };
    auto finished = [&](client_state& c, bool ok, std::size_t count, clock_type::time_point now) {
      --outstanding;
      const float us = std::chrono::duration<float, std::micro>(now - c.t0).count();
      ++r.ops;
      if (!ok)
        ++r.errors;
      else if (c.op == mix::exists_only) {
        r.exists_us.push_back(us);
        if (count != 64)
          ++r.lost;
      } else if (c.op == mix::get_only) {
        r.get_us.push_back(us);
        if (count != 1)
          ++r.lost;
        else {
          if (XXH3_64bits(c.conn->got(), block) != sums[c.key])
            ++r.wrong;
          r.bytes += block;
        }
      } else {
        r.set_us.push_back(us);
        if (count != 1)
          ++r.errors;
        r.bytes += block;
      }
      if (now >= end)
        return;
      if (think_ms > 0 && !c.bulk)
        due.emplace(now + think_for(c), &c);
      else
        start(c);
    };
    for (std::size_t i = static_cast<std::size_t>(l); i < cs.size(); i += static_cast<std::size_t>(loops)) {
      epoll_event e{EPOLLIN, {.ptr = &cs[i]}};
      ::epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].conn->fd(), &e);
      if (think_ms > 0 && !think_fixed && !cs[i].bulk)
        due.emplace(begin + think_for(cs[i]), &cs[i]); // independent users are not in step at the start either
      else
        start(cs[i]);
    }
    std::vector<epoll_event> events(256);
    std::vector<char> buf(4 << 20);
    const auto give_up = end + std::chrono::seconds(10); // replies still owed after the end
    for (;;) {
      auto now = clock_type::now();
      while (!due.empty() && due.top().first <= now && now < end) {
        start(*due.top().second);
        due.pop();
      }
      if ((now >= end && outstanding == 0) || now >= give_up)
        break;
      // Wake at the next due start to the microsecond: whole-millisecond
      // timeouts would start every client due in that millisecond together.
      std::int64_t timeout_ns = 100'000'000;
      if (!due.empty() && now < end)
        timeout_ns = std::clamp<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(due.top().first - now).count(), 0, timeout_ns);
      const timespec timeout{static_cast<time_t>(timeout_ns / 1'000'000'000),
                             static_cast<long>(timeout_ns % 1'000'000'000)};
      const int n = ::epoll_pwait2(ep, events.data(), int(events.size()), &timeout, nullptr);
      for (int i = 0; i < n; ++i) {
        auto& c = *static_cast<client_state*>(events[static_cast<std::size_t>(i)].data.ptr);
        if (events[static_cast<std::size_t>(i)].events & EPOLLOUT)
          try_send(c);
        if (!(events[static_cast<std::size_t>(i)].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
          continue;
        for (;;) {
          const ssize_t got = ::recv(c.conn->fd(), buf.data(), buf.size(), 0);
          if (got < 0 && errno == EAGAIN)
            break;
          if (got <= 0)
            throw std::runtime_error("a store closed a connection");
          bool ok = false;
          std::size_t count = 0;
          if (c.conn->feed(buf.data(), static_cast<std::size_t>(got), ok, count)) {
            finished(c, ok, count, clock_type::now());
            break;
          }
        }
      }
    }
    r.errors += outstanding; // requests never answered
    ::close(ep);
  };
  std::vector<std::thread> threads;
  for (int l = 1; l < loops; ++l)
    threads.emplace_back(loop, l);
  loop(0);
  for (auto& th : threads)
    th.join();
  phase_result total;
  total.seconds = seconds;
  for (auto& p : per)
    total.merge(p);
  return total;
}

// kvtierd's /metrics over loopback HTTP (one request per connection).
std::string scrape(const std::string& address) {
  const auto colon = address.rfind(':');
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string body;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string q = "GET /metrics HTTP/1.1\r\nHost: " + address + "\r\nConnection: close\r\n\r\n";
    send_all(fd, q.data(), q.size());
    char buf[65536];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;)
      body.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return body;
}

// Every sample "name{labels} value" of one metric family whose line starts with `prefix`.
std::vector<std::pair<std::string, double>> samples(const std::string& text, const std::string& prefix) {
  std::vector<std::pair<std::string, double>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(prefix)) {
      const auto sp = line.rfind(' ');
      out.emplace_back(line.substr(0, sp), std::stod(line.substr(sp + 1)));
    }
  return out;
}

double sample(const std::string& text, const std::string& name) {
  for (auto& [n, v] : samples(text, name))
    if (n == name)
      return v;
  return 0;
}

// A percentile from the difference of two scrapes of one histogram: the
// upper bound of the bucket that holds it (Prometheus's buckets are coarse:
// the true value lies between this bound and the one below).
double histogram_percentile(const std::string& before, const std::string& after, const std::string& series, double p) {
  auto b = samples(before, series + "_bucket{"), a = samples(after, series + "_bucket{");
  if (a.empty() || a.size() != b.size())
    return 0;
  const double total = a.back().second - b.back().second;
  if (total <= 0)
    return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].second - b[i].second >= p * total) {
      const auto le = a[i].first.find("le=\"");
      const auto bound = a[i].first.substr(le + 4, a[i].first.find('"', le + 4) - le - 4);
      return bound == "+Inf" ? 1e9 : std::stod(bound) * 1e6;
    }
  return 0;
}

// What kvtierd measured during a phase: service time per op (frame decoded to
// reply queued), how late its io thread ran, and where its CPU went.
nlohmann::json server_view(const std::string& before, const std::string& after, double seconds, std::uint64_t ops) {
  nlohmann::json j;
  for (const char* op : {"exists", "get", "set"}) {
    const std::string s = fmt::format("kvtier_request_duration_seconds_bucket{{op=\"{}\",", op);
    const std::string series = "kvtier_request_duration_seconds";
    auto filtered = [&](const std::string& text) {
      std::string out;
      for (auto& [n, v] : samples(text, s))
        out += n + " " + fmt::format("{}", v) + "\n";
      return out;
    };
    const auto fb = filtered(before), fa = filtered(after);
    const double count = sample(after, fmt::format("{}_count{{op=\"{}\"}}", series, op)) -
        sample(before, fmt::format("{}_count{{op=\"{}\"}}", series, op));
    if (count == 0)
      continue;
    j[fmt::format("{}_service_p50_us_le", op)] = histogram_percentile(fb, fa, series, 0.5);
    j[fmt::format("{}_service_p99_us_le", op)] = histogram_percentile(fb, fa, series, 0.99);
    j[fmt::format("{}_service_p999_us_le", op)] = histogram_percentile(fb, fa, series, 0.999);
    j[fmt::format("{}_service_mean_us", op)] = (sample(after, fmt::format("{}_sum{{op=\"{}\"}}", series, op)) -
                                                sample(before, fmt::format("{}_sum{{op=\"{}\"}}", series, op))) /
        count * 1e6;
  }
  j["io_lag_p50_us_le"] = histogram_percentile(before, after, "kvtier_io_loop_lag_seconds", 0.5);
  j["io_lag_p99_us_le"] = histogram_percentile(before, after, "kvtier_io_loop_lag_seconds", 0.99);
  j["io_lag_p999_us_le"] = histogram_percentile(before, after, "kvtier_io_loop_lag_seconds", 0.999);
  auto delta = [&](const char* name) { return sample(after, name) - sample(before, name); };
  j["io_thread_cpu_share"] = delta("kvtier_io_thread_cpu_seconds_total") / seconds;
  j["io_thread_cpu_us_per_op"] = ops > 0 ? delta("kvtier_io_thread_cpu_seconds_total") / double(ops) * 1e6 : 0.0;
  j["io_thread_copy_share"] = delta("kvtier_copy_seconds_total{thread=\"io\"}") / seconds;
  j["copy_threads_copy_share"] = delta("kvtier_copy_seconds_total{thread=\"copy\"}") / seconds;
  return j;
}

struct daemon_child {
  pid_t pid = -1;
  std::string socket;
  std::string metrics; // host:port of /metrics
  ~daemon_child() {
    if (pid > 0) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

void start_kvtierd(daemon_child& d, const std::string& binary, const fs::path& dir, const std::string& block,
                   const std::string& dram, int copy_threads) {
  d.socket = (dir / ("d-" + block + ".sock")).string();
  const auto cfg = dir / ("d-" + block + ".toml");
  std::ofstream(cfg) << "[daemon]\nsocket = \"" << d.socket << "\"\nmetrics = \"127.0.0.1:0\"\nblock_bytes = \""
                     << block << "\"\nmax_sessions = 5000\ncopy_threads = " << copy_threads << "\n[dram]\nbytes = \""
                     << dram << "\"\n[[tenant]]\nname = \"bench\"\ntoken = \"bench\"\n";
  const auto log = dir / ("kvtierd-" + block + ".log");
  d.pid = spawn({binary, cfg.string()}, log.string());
  // The DRAM tier is faulted in first; then kvtierd prints where it listens.
  const std::string marker = "metrics at http://";
  for (int i = 0; i < 12000 && d.metrics.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (const auto at = text.find(marker);
        at != std::string::npos && text.find("/metrics", at + marker.size()) != std::string::npos)
      d.metrics = text.substr(at + marker.size(), text.find("/metrics", at + marker.size()) - at - marker.size());
  }
  if (d.metrics.empty() || !fs::exists(d.socket))
    throw std::runtime_error("kvtierd did not start");
}

} // namespace

int main(int argc, char** argv) {
  options o;
  const char* usage =
      "usage: bench_daemon_load [--clients N] [--seconds S] [--think-ms MS] [--think exponential|fixed] [--loops L] "
      "[--copy-threads T] "
      "[--json FILE] [--kvtierd PATH] [--redis-server PATH] [--phases mixed,exists64,bulk] [--server-cpus LIST] "
      "[--load-cpus LIST]\n";
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
    else if (a == "--think") {
      if (v != "exponential" && v != "fixed") {
        fmt::print(stderr, "bench_daemon_load: --think: \"{}\": expected exponential or fixed\n", v);
        return 2;
      }
      o.think_fixed = v == "fixed";
    } else if (a == "--copy-threads")
      o.copy_threads = std::stoi(v);
    else if (a == "--loops")
      o.loops = std::max(1, std::stoi(v));
    else if (a == "--json")
      o.json = v;
    else if (a == "--kvtierd")
      o.kvtierd = v;
    else if (a == "--redis-server")
      o.redis_server = v;
    else if (a == "--server-cpus")
      o.server_cpus = v;
    else if (a == "--load-cpus")
      o.load_cpus = v;
    else if (a == "--phases") {
      o.phases.clear();
      std::istringstream in(v);
      for (std::string p; std::getline(in, p, ',');) {
        if (p != "mixed" && p != "exists64" && p != "bulk") {
          fmt::print(stderr, "bench_daemon_load: --phases: \"{}\": expected mixed, exists64 or bulk\n", p);
          return 2;
        }
        o.phases.push_back(p);
      }
    } else {
      fmt::print(stderr, "bench_daemon_load: unknown flag {}\n{}", a, usage);
      return 2;
    }
  }
  for (auto [flag, list] : {std::pair{"--server-cpus", &o.server_cpus}, std::pair{"--load-cpus", &o.load_cpus}}) {
    if (list->empty())
      continue;
    const auto set = parse_cpus(*list);
    if (!set) {
      fmt::print(stderr, "bench_daemon_load: {} \"{}\": expected CPU numbers and ranges, e.g. 0-1 or 2,4-15\n", flag,
                 *list);
      return 2;
    }
    if (flag == std::string("--server-cpus"))
      server_cpus = set;
    else if (::sched_setaffinity(0, sizeof *set, &*set) != 0) { // the generator's threads inherit it
      fmt::print(stderr, "bench_daemon_load: --load-cpus {}: {}\n", *list, std::strerror(errno));
      return 2;
    }
  }
  auto wanted = [&](const char* phase) { return std::ranges::find(o.phases, phase) != o.phases.end(); };
  ::signal(SIGPIPE, SIG_IGN);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files); // two descriptors per client
  files.rlim_cur = files.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &files);
  const fs::path dir = fs::temp_directory_path() / ("bench-daemon-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // redis-server on a loopback port, nothing persisted.
  const int port = 20000 + ::getpid() % 20000;
  const pid_t redis = spawn({o.redis_server, "--port", std::to_string(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--maxclients", "5000", "--protected-mode", "no", "--maxmemory",
                             "4gb", "--maxmemory-policy", "allkeys-lru"},
                            (dir / "redis.log").string());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  nlohmann::json out;
  out["clients"] = o.clients;
  out["seconds_per_phase"] = o.seconds;
  out["think_ms"] = o.think_ms;
  out["think"] = o.think_fixed ? "fixed" : "exponential";
  out["generator_threads"] = o.loops;
  out["kvtierd_copy_threads"] = o.copy_threads;
  out["cores"] = std::thread::hardware_concurrency();
  out["server_cpus"] = o.server_cpus;
  out["load_cpus"] = o.load_cpus;
  int rc = 0;
  try {
    // Mixed load and exists64: 32 KiB blocks, 8192 preloaded.
    constexpr std::size_t small = 32 * 1024;
    constexpr std::uint64_t small_n = 8192;
    if (wanted("mixed") || wanted("exists64")) {
      daemon_child d;
      start_kvtierd(d, o.kvtierd, dir, "32KiB", "2GiB", o.copy_threads);
      const store_target kv{d.socket, 0}, rd{"", port};
      preload(kv, small, small_n);
      preload(rd, small, small_n);
      // kvtierd's phases are bracketed by scrapes of its /metrics.
      auto phase = [&](const store_target& t, bool is_kv, int clients, int think, std::size_t block,
                       std::uint64_t preloaded, mix m) {
        const auto before = is_kv ? scrape(d.metrics) : "";
        auto r = run_phase(t, clients, o.loops, o.seconds, think, o.think_fixed, block, preloaded, m);
        if (is_kv)
          r.server = server_view(before, scrape(d.metrics), r.seconds, r.ops);
        return r.json();
      };
      for (auto [name, t] : {std::pair{"kvtierd", kv}, std::pair{"redis", rd}}) {
        const bool is_kv = name == std::string("kvtierd");
        if (wanted("mixed"))
          out["mixed"][name] = phase(t, is_kv, o.clients, o.think_ms, small, small_n, mix::mixed);
        if (wanted("exists64"))
          out["exists64"][name] = phase(t, is_kv, o.clients, 0, small, small_n, mix::exists_only);
      }
    }
    // 2 MiB blocks: 16 clients, get and set, 256 blocks preloaded.
    constexpr std::size_t big = 2 << 20;
    constexpr std::uint64_t big_n = 256;
    if (wanted("bulk")) {
      daemon_child d;
      start_kvtierd(d, o.kvtierd, dir, "2MiB", "4GiB", o.copy_threads);
      const store_target kv{d.socket, 0}, rd{"", port};
      preload(kv, big, big_n);
      preload(rd, big, big_n);
      for (auto [name, t] : {std::pair{"kvtierd", kv}, std::pair{"redis", rd}}) {
        const bool is_kv = name == std::string("kvtierd");
        // Exists with think time while 16 connections get 2 MiB blocks: what
        // a control request waits behind bulk copies. First: the set phase
        // evicts preloaded blocks.
        const auto at_start = is_kv ? scrape(d.metrics) : "";
        auto under =
            run_phase(t, o.clients, o.loops, o.seconds, o.think_ms, o.think_fixed, big, big_n, mix::exists_only, 16);
        if (is_kv)
          under.server = server_view(at_start, scrape(d.metrics), under.seconds, under.ops);
        out["exists_under_bulk"][name] = under.json();
        for (auto [phase_name, m] : {std::pair{"get_2mib", mix::get_only}, std::pair{"set_2mib", mix::set_only}}) {
          const auto before = is_kv ? scrape(d.metrics) : "";
          auto r = run_phase(t, 16, o.loops, o.seconds, 0, o.think_fixed, big, big_n, m);
          if (is_kv)
            r.server = server_view(before, scrape(d.metrics), r.seconds, r.ops);
          out[phase_name][name] = r.json();
        }
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

  std::vector<const char*> ran; // the phases run, in the order printed
  for (const char* phase : {"mixed", "exists64", "get_2mib", "set_2mib", "exists_under_bulk"})
    if (out.contains(phase))
      ran.push_back(phase);
  auto ratio = [&](const char* phase, const char* field) {
    if (!out.contains(phase))
      return 0.0;
    const double r = out[phase]["redis"][field].get<double>();
    return r > 0 ? out[phase]["kvtierd"][field].get<double>() / r : 0.0;
  };
  out["ratio_get_2mib_gb_per_s"] = ratio("get_2mib", "gb_per_s");
  out["ratio_set_2mib_gb_per_s"] = ratio("set_2mib", "gb_per_s");
  out["ratio_exists64_ops_per_s"] = ratio("exists64", "ops_per_s");
  std::uint64_t bad = 0;
  for (const char* phase : ran)
    for (const char* who : {"kvtierd", "redis"})
      bad += out[phase][who]["errors"].get<std::uint64_t>() + out[phase][who]["wrong_blocks"].get<std::uint64_t>() +
          out[phase][who]["lost_blocks"].get<std::uint64_t>();
  out["errors_lost_wrong"] = bad;

  fmt::print("kvtierd vs redis-server (hiredis), loopback, {} clients, {} s per phase, {} cores, stores on cpus "
             "[{}], load on cpus [{}]\n",
             o.clients, o.seconds, std::thread::hardware_concurrency(), o.server_cpus.empty() ? "any" : o.server_cpus,
             o.load_cpus.empty() ? "any" : o.load_cpus);
  fmt::print("{:<10} {:<8} {:>12} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7}\n", "phase", "store", "ops/s",
             "GB/s", "exists p50", "exists p99", "get p50", "get p99", "set p50", "set p99", "errors");
  for (const char* phase : ran)
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
  fmt::print("{:<10} {:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  (p999, client side)\n", "phase", "store",
             "exists", "get", "set", "", "", "");
  for (const char* phase : ran)
    for (const char* who : {"kvtierd", "redis"}) {
      const auto& p = out[phase][who];
      fmt::print("{:<10} {:<8} {:>8.0f}us {:>8.0f}us {:>8.0f}us\n", phase, who, p["exists_p999_us"].get<double>(),
                 p["get_p999_us"].get<double>(), p["set_p999_us"].get<double>());
    }
  fmt::print("kvtierd's own view (bucket bounds from /metrics: service = frame decoded to reply queued; io lag = how "
             "late its io thread ran a due timer)\n");
  for (const char* phase : ran) {
    const auto& s = out[phase]["kvtierd"]["server"];
    std::string line =
        fmt::format("{:<10} io lag p50/p99/p999 <= {}/{}/{} us, io thread cpu {:.0f}% ({:.2f} us per op), copies on io "
                    "thread {:.0f}%, on copy threads {:.0f}%",
                    phase, s["io_lag_p50_us_le"].get<double>(), s["io_lag_p99_us_le"].get<double>(),
                    s["io_lag_p999_us_le"].get<double>(), 100 * s["io_thread_cpu_share"].get<double>(),
                    s["io_thread_cpu_us_per_op"].get<double>(), 100 * s["io_thread_copy_share"].get<double>(),
                    100 * s["copy_threads_copy_share"].get<double>());
    for (const char* op : {"exists", "get", "set"})
      if (s.contains(fmt::format("{}_service_p99_us_le", op)))
        line += fmt::format("; {} service mean {:.1f} us, p99 <= {} us", op,
                            s[fmt::format("{}_service_mean_us", op)].get<double>(),
                            s[fmt::format("{}_service_p99_us_le", op)].get<double>());
    fmt::print("{}\n", line);
  }
  const double mixed_p99 = out.contains("mixed") ? out["mixed"]["kvtierd"]["exists_p99_us"].get<double>() : 0.0;
  fmt::print("ratios kvtierd/redis: get 2 MiB GB/s {:.2f}x (goal >= 5), set 2 MiB GB/s {:.2f}x, exists64 ops/s "
             "{:.2f}x (goal >= 2); mixed exists p99 {:.0f} us (goal <= 1000); errors+lost+wrong {}\n",
             out["ratio_get_2mib_gb_per_s"].get<double>(), out["ratio_set_2mib_gb_per_s"].get<double>(),
             out["ratio_exists64_ops_per_s"].get<double>(), mixed_p99, bad);
  fmt::print("{}\n", out.dump());
  if (!o.json.empty())
    std::ofstream(o.json) << out.dump(2) << "\n";
  return bad == 0 ? 0 : 1;
}
