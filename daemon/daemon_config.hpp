#pragma once
// kvtierd's configuration (configs/daemon.toml), read once into typed values.
// Every mistake is a located error (file:line:column, table, key, what was
// expected); a config that passes read_daemon_config is one the daemon can
// start with, short of the OS refusing a socket or a file.

#include "runtime/nvme_settings.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::daemon {

struct tenant_config {
  std::string name;
  std::string token;
  /// Tenants with the same share group use one salt and see each other's
  /// blocks; by default each tenant is its own group.
  std::string share;
  std::uint64_t quota_blocks = 0; // 0: no quota
};

struct daemon_config {
  std::string socket = "/run/kvtierd/kvtierd.sock"; // Unix socket, created with mode 0600
  std::string tcp;                                  // "127.0.0.1:7070": also listen on loopback TCP
  std::string metrics = "127.0.0.1:9464";           // /metrics and /healthz; empty: none
  std::uint64_t block_bytes = 2ull << 20;
  std::uint64_t max_frame_bytes = 1ull << 20;
  std::uint64_t max_region_bytes = 64ull << 30; // per connection
  std::uint32_t max_sessions = 4096;
  /// Threads that copy blocks between the tiers and client regions, so the
  /// io thread never waits behind a bulk copy; 0 copies on the io thread.
  std::uint32_t copy_threads = 2;
  std::uint64_t dram_bytes = 1ull << 30;
  bool dram_prefault = true; // fault the DRAM tier in at start, not in the request path
  std::string nvme_path;     // empty: no NVMe tier (DRAM holds every block)
  std::uint64_t nvme_bytes = 0;
  nvme_settings nvme;
  // Each link's limit in GB/s (1e9 bytes), exported beside what it moves;
  // 0: not stated (the device's rating or a measured copy rate goes here).
  double dram_copy_gbps = 0;
  double nvme_read_gbps = 0;
  double nvme_write_gbps = 0;
  std::vector<tenant_config> tenants;

  std::uint32_t dram_slots() const { return static_cast<std::uint32_t>(dram_bytes / block_bytes); }
  std::uint32_t nvme_slots() const { return static_cast<std::uint32_t>(nvme_bytes / block_bytes); }
};

caf::expected<daemon_config> read_daemon_config(const std::string& path);
/// The same from TOML text (tests), `file` naming it in errors.
caf::expected<daemon_config> parse_daemon_config(std::string_view text, const std::string& file);

} // namespace kvtier::daemon
