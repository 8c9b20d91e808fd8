#include "actors/move_tracker.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier {

std::vector<transfer_batch> move_tracker::take_batches() {
  std::vector<transfer_batch> out;
  if (staged_.empty())
    return out;
  for (const auto& m : staged_) {
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& b) { return b.from == m.from && b.to == m.to; });
    if (it == out.end()) {
      out.push_back(transfer_batch{next_tag_++, m.from, m.to, {}, {}});
      it = std::prev(out.end());
    }
    it->moves.push_back({index_of(m.src), index_of(m.dst)});
    it->hashes.push_back(m.hash);
    it->background = it->background && m.kind == move_kind::demote;
    in_flight_[it->tag].push_back(m);
  }
  staged_.clear();
  return out;
}

std::vector<pending_move> move_tracker::finish(uint64_t tag) {
  auto it = in_flight_.find(tag);
  KVTIER_CHECK(it != in_flight_.end(), "on_transfer_done: unknown transfer tag");
  auto moves = std::move(it->second);
  in_flight_.erase(it);
  return moves;
}

} // namespace kvtier
