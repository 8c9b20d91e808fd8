#pragma once
// Runs kvtierd (the built binary) as a child process over a Unix socket in a
// temporary folder, and helps tests fork client processes and check blocks
// by content.

#include "client/client.hpp"
#include "tests/child_process.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace kvtier::daemon::testing {

namespace fs = std::filesystem;

/// A block's bytes, a function of (seed, index): a wrong or stale block
/// shows up as a wrong checksum.
inline void fill_block(std::byte* p, std::size_t bytes, std::uint64_t seed, std::uint64_t index) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + index * 0xC2B2AE3D27D4EB4Full + 1;
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, 8);
  }
}
inline std::uint64_t checksum(const std::byte* p, std::size_t bytes) {
  return XXH3_64bits(p, bytes);
}
inline std::uint64_t expected_checksum(std::size_t bytes, std::uint64_t seed, std::uint64_t index) {
  std::vector<std::byte> b(bytes);
  fill_block(b.data(), bytes, seed, index);
  return checksum(b.data(), bytes);
}
inline client::block_key key_of(std::uint64_t seed, std::uint64_t index) {
  return {seed * 1'000'003 + index + 1, seed};
}

/// Forks a child that runs `body` and exits with its return value (0: passed).
inline pid_t fork_client(const std::function<int()>& body) {
  const pid_t pid = kvtier::testing::fork_child();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = body();
    } catch (...) {
    }
    std::fflush(stdout);
    ::_exit(rc);
  }
  return pid;
}
/// The child's exit code (128 + signal if one ended it); one still running
/// after two minutes is killed and fails the test.
inline int wait_exit(pid_t pid) {
  return kvtier::testing::wait_child(pid, "a forked client");
}

class daemon_process {
public:
  explicit daemon_process(std::string name) {
    dir_ = fs::temp_directory_path() / ("kvtierd-test-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~daemon_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      kvtier::testing::wait_child(pid_, "kvtierd after SIGKILL");
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string socket() const { return (dir_ / "d.sock").string(); }
  std::string dir() const { return dir_.string(); }

  /// A config with `extra` appended ([[tenant]] tables, [nvme], ...) and
  /// `daemon_keys` added to [daemon].
  std::string config(const std::string& block_bytes, const std::string& dram, const std::string& extra,
                     const std::string& daemon_keys = "") const {
    return "[daemon]\nsocket = \"" + socket() + "\"\nmetrics = \"127.0.0.1:0\"\nblock_bytes = \"" + block_bytes +
        "\"\nmax_frame_bytes = \"64KiB\"\n" + daemon_keys + "[dram]\nbytes = \"" + dram + "\"\n" + extra;
  }

  /// Starts kvtierd and waits until its socket accepts; the metrics port is
  /// read from its first lines of output.
  void start(const std::string& config_text) {
    std::ofstream(dir_ / "d.toml") << config_text;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const auto out = (dir_ / "out.txt").string();
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, (dir_ / "err.txt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const std::string binary = KVTIERD_BINARY, cfg = (dir_ / "d.toml").string();
    char* argv[] = {const_cast<char*>(binary.c_str()), const_cast<char*>(cfg.c_str()), nullptr};
    ASSERT_EQ(::posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    for (int i = 0; i < 500; ++i) {
      if (connectable() && metrics_port_from_output())
        return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "kvtierd exited at start: " << read_file("err.txt");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL() << "kvtierd did not listen within 5 s: " << read_file("err.txt");
  }
  /// SIGTERM, then the exit status; a daemon still running a minute later
  /// is killed and fails the test, its error output with it.
  int stop() {
    ::kill(pid_, SIGTERM);
    const int rc = kvtier::testing::wait_child(pid_, "kvtierd after SIGTERM", std::chrono::seconds(60));
    pid_ = -1;
    if (rc == 124)
      ADD_FAILURE() << "kvtierd's error output: " << read_file("err.txt");
    return rc;
  }
  void kill9() {
    ::kill(pid_, SIGKILL);
    kvtier::testing::wait_child(pid_, "kvtierd after SIGKILL");
    pid_ = -1;
  }
  int metrics_port() const { return metrics_port_; }
  /// The loopback TCP address kvtierd bound ("127.0.0.1:PORT"), from its output.
  std::string tcp_address() const {
    const auto text = read_file("out.txt");
    const auto at = text.find(" and tcp ");
    if (at == std::string::npos)
      return "";
    const auto end = text.find_first_of(";\n", at + 9);
    return text.substr(at + 9, end - at - 9);
  }
  std::string read_file(const std::string& name) const {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  client::client connect(const std::string& tenant = "a", const std::string& token = "ta") const {
    auto c = client::client::connect(socket(), tenant, token);
    if (!c)
      throw std::runtime_error(c.err().what());
    return std::move(*c);
  }

private:
  bool connectable() const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket().c_str(), sizeof addr.sun_path - 1);
    const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    return ok;
  }
  bool metrics_port_from_output() {
    const auto text = read_file("out.txt");
    const auto at = text.find("http://127.0.0.1:");
    if (at == std::string::npos)
      return false;
    metrics_port_ = std::stoi(text.substr(at + 17));
    return true;
  }
  fs::path dir_;
  pid_t pid_ = -1;
  int metrics_port_ = 0;
};

/// Two tenants sharing nothing, a third sharing with the first, one with a quota.
inline const char* tenants_toml = R"(
[[tenant]]
name = "a"
token = "ta"
[[tenant]]
name = "b"
token = "tb"
[[tenant]]
name = "c"
token = "tc"
share = "a"
[[tenant]]
name = "q"
token = "tq"
quota_blocks = 4
)";

} // namespace kvtier::daemon::testing
