#include "daemon/tenants.hpp"

#include <xxhash.h>

namespace kvtier::daemon {

namespace {

bool same_secret(const std::string& a, const std::string& b) {
  // Length leaks; the bytes do not.
  if (a.size() != b.size())
    return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

} // namespace

tenant_table::tenant_table(const std::vector<tenant_config>& configs) {
  for (const auto& c : configs) {
    tenant t;
    t.config = c;
    t.salt = XXH3_64bits(c.share.data(), c.share.size());
    tenants_.push_back(std::move(t));
  }
}

std::optional<std::uint32_t> tenant_table::authenticate(const std::string& name, const std::string& token) const {
  for (std::uint32_t i = 0; i < tenants_.size(); ++i)
    if (tenants_[i].config.name == name)
      return same_secret(tenants_[i].config.token, token) ? std::optional(i) : std::nullopt;
  return std::nullopt;
}

std::uint32_t tenant_table::owner_of_salt(std::uint64_t salt) const {
  for (std::uint32_t i = 0; i < tenants_.size(); ++i)
    if (tenants_[i].salt == salt)
      return i;
  return 0;
}

} // namespace kvtier::daemon
