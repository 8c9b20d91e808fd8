#pragma once
// The configured tenants: who may connect (name and token), the salt each
// one's keys are hashed with, its quota, and its hit counters.
//
// Invariants: salts are a function of the share group alone (XXH3-64 of its
// name), so they are the same after a restart and the NVMe tier's recovered
// blocks find their owners again; tenants of one share group have one salt
// and see each other's blocks; any other two tenants never do.

#include "daemon/daemon_config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::daemon {

struct tenant {
  tenant_config config;
  std::uint64_t salt = 0;
  std::uint64_t hits = 0;     // keys found by exists (leading) and get
  std::uint64_t misses = 0;   // keys not found
  std::uint64_t refusals = 0; // requests refused by quota
};

class tenant_table {
public:
  explicit tenant_table(const std::vector<tenant_config>& configs);
  /// The tenant `name` if `token` is its token (compared in constant time).
  std::optional<std::uint32_t> authenticate(const std::string& name, const std::string& token) const;
  /// The first tenant whose salt is `salt`; tenant 0 when none is (a block
  /// of a tenant no longer configured is counted against the first).
  std::uint32_t owner_of_salt(std::uint64_t salt) const;
  tenant& operator[](std::uint32_t i) { return tenants_[i]; }
  const tenant& operator[](std::uint32_t i) const { return tenants_[i]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(tenants_.size()); }

private:
  std::vector<tenant> tenants_;
};

} // namespace kvtier::daemon
