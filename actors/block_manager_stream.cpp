// Streaming a sequence larger than HBM: its cold blocks go to DRAM, where
// its steps read them (block_manager_state.hpp says which blocks and when).

#include "actors/block_manager_state.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier {

uint32_t block_manager_state::streamed_blocks(uint64_t seq) const {
  return static_cast<uint32_t>(sequences_.at(seq).streamed.size());
}

bool block_manager_state::alone_in_hbm(uint64_t seq) const {
  return std::none_of(sequences_.begin(), sequences_.end(),
                      [&](const auto& other) { return other.first != seq && !other.second.table.blocks().empty(); });
}

admit_status block_manager_state::extend(uint64_t seq, uint32_t tokens) {
  if (grow(seq, tokens))
    return admit_status::ready;
  switch (spill_cold(seq, blocks_needed(seq, tokens))) {
    case spill_result::none:
      return admit_status::no_room;
    case spill_result::copying:
      return admit_status::loading;
    case spill_result::done:
      break;
  }
  return grow(seq, tokens) ? admit_status::ready : admit_status::no_room;
}

block_manager_state::spill_result block_manager_state::spill_cold(uint64_t seq, uint32_t needed) {
  if (!options_.stream_from_dram || !enabled(tier::dram))
    return spill_result::none;
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::spill_cold: sequence is not resident");
  const auto& blocks = s.table.blocks();
  // A sequence that fits HBM whole does not stream: short of room, it is
  // preempted like any other (vLLM's behavior, and its steps stay at HBM speed).
  // One whose prompt alone is larger does, from the first grow that finds
  // no room (others may hold HBM while it is still small). So does one that
  // is alone in HBM: preempting it would free nothing it could use (what it
  // lacks is held by copies in flight), and it would swap back in to fail
  // again at the same instant.
  const uint64_t prompt_blocks = (s.prompt_tokens + options_.block_tokens - 1) / options_.block_tokens;
  if (s.streamed.empty() && prompt_blocks <= options_.hbm_blocks && blocks.size() + needed <= options_.hbm_blocks &&
      !alone_in_hbm(seq))
    return spill_result::none;
  size_t full = s.table.tokens() / options_.block_tokens;
  size_t cold = full > options_.stream_recent_blocks ? full - options_.stream_recent_blocks : 0;
  // Spill a batch at a time, so a decoding sequence waits for a copy down
  // once per batch rather than once per block.
  uint32_t want = std::max(needed, options_.hbm_blocks / 32);
  auto& hbm = store(tier::hbm);
  auto& dram = store(tier::dram);
  auto settled_copy = [&](block_id b) {
    const auto& h = hbm.pool().hash(b);
    auto below = h.empty() ? invalid_block : dram.find(h);
    return below != invalid_block && dram.pool().state(below) != block_state::moving ? below : invalid_block;
  };
  // Pass 1: how many of the oldest blocks free `want` slots (a block another
  // sequence shares frees none), and how many of them need a copy.
  size_t n = 0;
  uint32_t freed = 0, copies = 0;
  for (; n < cold && freed < want; ++n) {
    freed += hbm.pool().ref_count(blocks[n]) == 1 ? 1 : 0;
    copies += settled_copy(blocks[n]) == invalid_block ? 1 : 0;
  }
  if (freed < needed || copies > dram.pool().free_count())
    return spill_result::none;
  // Pass 2: pin the DRAM copies that exist before allocating, so no
  // allocation evicts them; then copy the rest down.
  s.spilling.assign(n, invalid_block);
  for (size_t i = 0; i < n; ++i)
    if (auto below = settled_copy(blocks[i]); below != invalid_block) {
      dram.pin(below);
      s.spilling[i] = below;
    }
  for (size_t i = 0; i < n; ++i) {
    if (s.spilling[i] != invalid_block)
      continue;
    auto dst = tiers_.allocate(tier::dram);
    KVTIER_CHECK(dst, "spill_cold: free_count promised a DRAM slot");
    dram.pool().set_state(*dst, block_state::moving);
    const auto& h = hbm.pool().hash(blocks[i]);
    if (!h.empty() && dram.find(h) == invalid_block)
      dram.index_as(*dst, h);
    s.spilling[i] = *dst;
    queue_move({move_kind::spill, tier::hbm, blocks[i], tier::dram, *dst, h, seq, invalid_block});
    ++s.loading;
  }
  metrics_->spilled_blocks += n;
  if (s.loading > 0)
    return spill_result::copying;
  settle_spill(s);
  return spill_result::done;
}

void block_manager_state::settle_spill(sequence& s) {
  auto& hbm = store(tier::hbm);
  auto& dram = store(tier::dram);
  auto spilled = std::exchange(s.spilling, {});
  if (std::exchange(s.spill_failed, false)) {
    // Some copy did not land: the blocks stay in HBM (the next grow is refused).
    for (auto b = spilled.rbegin(); b != spilled.rend(); ++b)
      dram.free(*b);
    return;
  }
  // The spilled entries keep their places but name DRAM slots now.
  table_changed(s, s.streamed.size());
  for (auto b : s.table.take_front(spilled.size())) {
    // The DRAM copy backs the HBM slot, which stays cached where hashed
    // (exclusive: the DRAM copy is the block's one copy).
    bool hashed = !hbm.pool().hash(b).empty();
    if (hashed)
      hbm.set_backed(b, true);
    hbm.free(b);
    if (hashed && options_.exclusive)
      drop_copy(tier::hbm, b);
  }
  s.streamed.insert(s.streamed.end(), spilled.begin(), spilled.end());
}

} // namespace kvtier
