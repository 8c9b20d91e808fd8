#pragma once
// A redis-server of a test's own: started on a free loopback port with no
// persistence, killed (SIGKILL) with the object or by stop(). Tests that use
// it skip, saying why, where redis-server is not installed (available()).

#include <hiredis/hiredis.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kvtier::redis_testing {

inline constexpr const char* redis_server = "/usr/bin/redis-server";

inline bool redis_server_available() {
  return access(redis_server, X_OK) == 0;
}

inline uint16_t free_port() {
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

// A redis-server of the test's own, on a free loopback port, gone with the object.
class redis_test_server {
public:
  redis_test_server() : port_(free_port()) {
    auto port = std::to_string(port_);
    std::vector<std::string> args{redis_server, "--port",       port, "--bind",    "127.0.0.1", "--save",
                                  "",           "--appendonly", "no", "--logfile", "/dev/null"};
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    // Its output goes to /dev/null, never to the test's stdout: a server
    // left behind by a killed test would hold ctest's pipe open (tests/child_process.hpp).
    posix_spawn_file_actions_t quiet;
    posix_spawn_file_actions_init(&quiet);
    posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&quiet, 1, 2);
    if (posix_spawn(&pid_, redis_server, &quiet, nullptr, argv.data(), environ) != 0)
      pid_ = 0;
    posix_spawn_file_actions_destroy(&quiet);
    for (int i = 0; i < 200 && pid_ && !ready(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ~redis_test_server() { stop(); }
  void stop() {
    if (pid_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = 0;
    }
  }
  uint16_t port() const { return port_; }
  bool ready() const {
    auto* c = redisConnect("127.0.0.1", port_);
    bool ok = c && !c->err;
    if (ok) {
      auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
      ok = r && r->type == REDIS_REPLY_STATUS;
      if (r)
        freeReplyObject(r);
    }
    if (c)
      redisFree(c);
    return ok;
  }
  // Runs one command on a connection of its own.
  void command(const std::string& key, const std::string& value) const {
    auto* c = redisConnect("127.0.0.1", port_);
    auto* r =
        static_cast<redisReply*>(redisCommand(c, "SET %b %b", key.data(), key.size(), value.data(), value.size()));
    freeReplyObject(r);
    redisFree(c);
  }
  std::string get(const std::string& key) const {
    auto* c = redisConnect("127.0.0.1", port_);
    auto* r = static_cast<redisReply*>(redisCommand(c, "GET %b", key.data(), key.size()));
    std::string v = r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    freeReplyObject(r);
    redisFree(c);
    return v;
  }

  // Holds every client's write commands (CLIENT PAUSE ... WRITE) so that a
  // count read next is final: no SET runs between the count and a stop().
  void pause_writes() const {
    auto* c = redisConnect("127.0.0.1", port_);
    if (auto* r = static_cast<redisReply*>(redisCommand(c, "CLIENT PAUSE 60000 WRITE")))
      freeReplyObject(r);
    redisFree(c);
  }

  // One value of INFO's output ("cmdstat_set" -> "calls=12,usec=..."), or "".
  std::string info_field(const std::string& section, const std::string& field) const {
    auto* c = redisConnect("127.0.0.1", port_);
    auto* r = static_cast<redisReply*>(redisCommand(c, "INFO %s", section.c_str()));
    std::string text = r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
    if (r)
      freeReplyObject(r);
    redisFree(c);
    auto at = text.find(field + ":");
    if (at == std::string::npos)
      return "";
    auto end = text.find('\r', at);
    return text.substr(at + field.size() + 1, end - at - field.size() - 1);
  }
  // How many times the server ran a command ("set", "get"), from INFO commandstats.
  uint64_t calls(const std::string& command) const {
    auto v = info_field("commandstats", "cmdstat_" + command);
    return v.starts_with("calls=") ? std::stoull(v.substr(6)) : 0;
  }
  uint64_t keys() const {
    auto* c = redisConnect("127.0.0.1", port_);
    auto* r = static_cast<redisReply*>(redisCommand(c, "DBSIZE"));
    uint64_t n = r && r->type == REDIS_REPLY_INTEGER ? static_cast<uint64_t>(r->integer) : 0;
    if (r)
      freeReplyObject(r);
    redisFree(c);
    return n;
  }

private:
  uint16_t port_;
  pid_t pid_ = 0;
};

} // namespace kvtier::redis_testing
