#include "runtime/block_table.hpp"

#include "runtime/error.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier {

uint32_t block_table::tail_tokens() const {
  auto rem = static_cast<uint32_t>(tokens_ % block_tokens_);
  return (rem == 0) ? block_tokens_ : rem;
}

caf::expected<append_result> block_table::append(uint64_t tokens, block_pool& pool) {
  append_result result;
  if (tokens == 0)
    return result;
  uint64_t room_in_tail = blocks_.empty() ? 0 : block_tokens_ - tail_tokens();
  bool cow = room_in_tail > 0 && (pool.ref_count(blocks_.back()) > 1 || !pool.hash(blocks_.back()).empty());
  uint64_t spill = tokens > room_in_tail ? tokens - room_in_tail : 0;
  uint64_t needed = (spill + block_tokens_ - 1) / block_tokens_ + (cow ? 1 : 0);
  if (needed > pool.free_count())
    return make_error(errc::no_capacity, "block_table::append: not enough free blocks");
  if (cow) {
    auto fresh = pool.allocate();
    KVTIER_CHECK(fresh, "free_count promised a block");
    if (!fresh->evicted.empty()) {
      result.evicted.push_back(fresh->evicted);
      result.evicted_sole_copies += fresh->sole_copy ? 1 : 0;
    }
    result.copies.push_back({blocks_.back(), fresh->id, tail_tokens()});
    pool.release(blocks_.back());
    blocks_.back() = fresh->id;
    result.new_blocks.push_back(fresh->id);
  }
  for (uint64_t i = 0; i < needed - (cow ? 1 : 0); ++i) {
    auto fresh = pool.allocate();
    KVTIER_CHECK(fresh, "free_count promised a block");
    if (!fresh->evicted.empty()) {
      result.evicted.push_back(fresh->evicted);
      result.evicted_sole_copies += fresh->sole_copy ? 1 : 0;
    }
    blocks_.push_back(fresh->id);
    result.new_blocks.push_back(fresh->id);
  }
  tokens_ += tokens;
  return result;
}

void block_table::adopt_prefix(std::vector<block_id> blocks, uint64_t tokens) {
  KVTIER_CHECK(blocks_.empty() && tokens_ == 0, "block_table::adopt_prefix: table not empty");
  KVTIER_CHECK(blocks.size() == (tokens + block_tokens_ - 1) / block_tokens_, "adopt_prefix: blocks/tokens mismatch");
  blocks_ = std::move(blocks);
  tokens_ = tokens;
}

block_table block_table::fork(block_pool& pool) const {
  block_table child(block_tokens_);
  child.blocks_ = blocks_;
  child.tokens_ = tokens_;
  for (auto id : blocks_)
    pool.ref(id);
  return child;
}

void block_table::truncate(uint64_t tokens, block_pool& pool) {
  tokens = std::min(tokens, tokens_);
  size_t keep = static_cast<size_t>((tokens + block_tokens_ - 1) / block_tokens_);
  if (keep < blocks_.size()) {
    pool.release_sequence(std::span<const block_id>(blocks_).subspan(keep));
    blocks_.resize(keep);
  }
  tokens_ = tokens;
}

std::vector<block_id> block_table::remove(std::span<const uint32_t> indices) {
  std::vector<block_id> removed;
  if (indices.empty())
    return removed;
  KVTIER_CHECK(std::is_sorted(indices.begin(), indices.end()) &&
                   std::adjacent_find(indices.begin(), indices.end()) == indices.end() &&
                   indices.back() + size_t{1} < blocks_.size(),
               "block_table::remove: indices must ascend and stay below the last block");
  std::vector<block_id> kept;
  kept.reserve(blocks_.size() - indices.size());
  size_t next = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (next < indices.size() && indices[next] == i) {
      ++next;
      removed.push_back(blocks_[i]);
    } else {
      kept.push_back(blocks_[i]);
    }
  }
  blocks_ = std::move(kept);
  tokens_ -= uint64_t{block_tokens_} * indices.size();
  return removed;
}

std::vector<block_id> block_table::take_front(size_t n) {
  KVTIER_CHECK(uint64_t{n} * block_tokens_ <= tokens_, "block_table::take_front: a block that is not full");
  std::vector<block_id> front(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(n));
  blocks_.erase(blocks_.begin(), blocks_.begin() + static_cast<std::ptrdiff_t>(n));
  tokens_ -= uint64_t{n} * block_tokens_;
  return front;
}

void block_table::release_all(block_pool& pool) {
  pool.release_sequence(blocks_);
  blocks_.clear();
  tokens_ = 0;
}

} // namespace kvtier
