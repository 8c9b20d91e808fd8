// Invariant (3) of block_manager_state: counted allocations and the holder
// of every reference.

#include "actors/block_manager_state.hpp"

#include <fmt/format.h>

namespace kvtier {

std::string block_manager_state::check_conservation() const {
  for (auto t : local_tiers) {
    if (!enabled(t))
      continue;
    const auto& s = store(t);
    if (s.allocated() != s.freed() + s.pool().used_count())
      return fmt::format("{}: allocated {} != freed {} + resident {}", name_of(t), s.allocated(), s.freed(),
                         s.pool().used_count());
    // Every reference is held by a sequence or a move.
    std::vector<uint32_t> expected(s.pool().capacity(), 0);
    for (const auto& [id, seq] : sequences_) {
      if (t == tier::hbm)
        for (auto b : seq.table.blocks())
          ++expected[index_of(b)];
      if (t == tier::dram) {
        for (auto b : seq.dram_blocks)
          ++expected[index_of(b)];
        for (auto b : seq.streamed)
          ++expected[index_of(b)];
        for (auto b : seq.spilling)
          ++expected[index_of(b)];
      }
    }
    auto count_move = [&](const pending_move& m) {
      if (m.from == t && m.src != invalid_block && m.kind != move_kind::swap_out && m.kind != move_kind::spill)
        ++expected[index_of(m.src)];
      if (m.to == t && (m.kind == move_kind::demote || m.kind == move_kind::promote || m.kind == move_kind::swap_in))
        ++expected[index_of(m.dst)];
      if (t == tier::hbm && m.then_hbm != invalid_block)
        ++expected[index_of(m.then_hbm)];
    };
    moves_.for_each(count_move);
    for (uint32_t i = 0; i < s.pool().capacity(); ++i)
      if (s.pool().ref_count(block_id{i}) != expected[i])
        return fmt::format("{} slot {}: ref_count {} but {} holders", name_of(t), i, s.pool().ref_count(block_id{i}),
                           expected[i]);
  }
  return {};
}

} // namespace kvtier
