#pragma once
// Content identity of a full KV block, chained over the sequence's prefix.
//
// hash(block i) = XXH3-128(parent = hash(block i-1), tokens of block i,
// seeded by the tenant salt). Equal hashes mean equal prefixes for the same
// tenant; different salts never collide by construction of the seed. The
// all-zero value is reserved for "no hash" and never produced.

#include <cstdint>
#include <compare>
#include <functional>
#include <span>

namespace kvtier {

struct block_hash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  constexpr bool empty() const { return lo == 0 && hi == 0; }
  friend constexpr bool operator==(const block_hash&, const block_hash&) = default;
  friend constexpr auto operator<=>(const block_hash&, const block_hash&) = default; // an arbitrary total order
};

/// Salt that keeps tenants' caches apart; 0 is the shared (unsalted) tenant.
struct tenant_salt {
  uint64_t value = 0;
};

/// Hash of a full block of `tokens` following `parent` ({} for the first block).
block_hash hash_block(const block_hash& parent, std::span<const uint32_t> tokens, tenant_salt salt);

/// Hash of a block known only by an external id (e.g. a trace's hash_ids
/// entry), chained the same way so traces and token streams share one index.
block_hash hash_external_block(const block_hash& parent, uint64_t external_id, tenant_salt salt);

} // namespace kvtier

template <>
struct std::hash<kvtier::block_hash> {
  size_t operator()(const kvtier::block_hash& h) const noexcept { return h.lo ^ (h.hi * 0x9E3779B97F4A7C15ull); }
};
