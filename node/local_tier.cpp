#include "node/local_tier.hpp"

namespace kvtier::node {

local_tier::local_tier(uint32_t blocks, uint64_t block_bytes)
    : layout_{slot_order::block_major, blocks, 1, block_bytes},
      bytes_(layout_.total_bytes()),
      pool_(blocks),
      index_(blocks) {
}

std::span<std::byte> local_tier::bytes(block_id id) {
  return {bytes_.data() + layout_.offset(index_of(id), 0), layout_.block_bytes()};
}

block_id local_tier::find(const block_hash& hash) {
  auto id = index_.find(hash);
  if (id != invalid_block)
    pool_.ref(id);
  return id;
}

std::optional<block_id> local_tier::allocate() {
  auto a = pool_.allocate();
  if (!a)
    return std::nullopt;
  if (!a->evicted.empty())
    index_.erase(a->evicted);
  pool_.set_hash(a->id, {});
  return a->id;
}

void local_tier::publish(block_id id, const block_hash& hash) {
  auto previous = index_.find(hash);
  if (previous != invalid_block && previous != id)
    return; // another request filled the same block first: that copy stays the indexed one
  pool_.set_hash(id, hash);
  pool_.set_state(id, block_state::full);
  index_.insert(hash, id);
}

void local_tier::release(block_id id) {
  pool_.release_backed(id);
}

void local_tier::discard(block_id id) {
  if (index_.find(pool_.hash(id)) == id)
    index_.erase(pool_.hash(id));
  pool_.set_hash(id, {});
  pool_.release(id);
}

} // namespace kvtier::node
