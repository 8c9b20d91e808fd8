#pragma once
// A block the NVMe tier found on disk at start-up, left there by an earlier
// run: what the page store hands the block manager so that a restart finds
// those blocks by prefix lookup instead of recomputing them.
//
// Invariants: nvme_slot is inside the tier; hash is never empty; a (hash,
// salt_id) pair appears at most once in a list (the newest copy wins).

#include "runtime/block_hash.hpp"

#include <cstdint>

namespace kvtier {

struct recovered_block {
  uint32_t nvme_slot = 0;
  block_hash hash;
  uint64_t salt_id = 0; // tenant salt the hash was made with
  friend bool operator==(const recovered_block&, const recovered_block&) = default;
};

} // namespace kvtier
