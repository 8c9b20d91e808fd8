#include "runtime/prefix_index.hpp"

#include <bit>
#include "runtime/check.hpp"

namespace kvtier {

prefix_index::prefix_index(uint32_t capacity) : capacity_(capacity) {
  size_t buckets = std::bit_ceil(std::max<size_t>(16, size_t{capacity} * 2));
  mask_ = buckets - 1;
  buckets_ = zeroed_array<bucket>(buckets); // every bucket empty; pages fault in as they are used
}

block_id prefix_index::find(const block_hash& hash) const {
  auto key = key_of(hash);
  for (size_t i = home(key.lo);; i = (i + 1) & mask_) {
    const auto& b = buckets_[i];
    if (b.holds(key))
      return b.value;
    if (b.empty())
      return invalid_block;
  }
}

void prefix_index::insert(const block_hash& hash, block_id id) {
  KVTIER_CHECK(!hash.empty(), "prefix_index::insert: empty hash");
  auto key = key_of(hash);
  for (size_t i = home(key.lo);; i = (i + 1) & mask_) {
    auto& b = buckets_[i];
    if (b.holds(key)) {
      b.value = id;
      return;
    }
    if (b.empty()) {
      KVTIER_CHECK(size_ < capacity_, "prefix_index::insert: more entries than the tier has slots");
      b = {key.lo, key.hi, id};
      ++size_;
      return;
    }
  }
}

bool prefix_index::erase(const block_hash& hash) {
  auto key = key_of(hash);
  size_t i = home(key.lo);
  for (;; i = (i + 1) & mask_) {
    if (buckets_[i].holds(key))
      break;
    if (buckets_[i].empty())
      return false;
  }
  // Backward-shift: pull later members of the probe run into the hole so
  // lookups never need tombstones.
  size_t hole = i;
  for (size_t j = (hole + 1) & mask_; !buckets_[j].empty(); j = (j + 1) & mask_) {
    size_t want = home(buckets_[j].lo);
    bool movable = (hole <= j) ? (want <= hole || want > j) : (want <= hole && want > j);
    if (movable) {
      buckets_[hole] = buckets_[j];
      hole = j;
    }
  }
  buckets_[hole] = bucket{0, 0, invalid_block};
  --size_;
  return true;
}

size_t prefix_index::longest_prefix(std::span<const block_hash> chain) const {
  size_t n = 0;
  while (n < chain.size() && find(chain[n]) != invalid_block)
    ++n;
  return n;
}

} // namespace kvtier
