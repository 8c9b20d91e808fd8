// Demote-ahead and what a finished move does to slots and sequences.

#include "actors/block_manager_state.hpp"

#include "runtime/check.hpp"

#include <algorithm>

namespace kvtier {
namespace {

// How far demote_ahead() walks a dirty list per call: bounds its cost per step.
constexpr uint32_t max_demote_walk = 512;

link_runs* link_of(batch_runs& runs, tier from, tier to) {
  if (from == tier::hbm && to == tier::dram)
    return &runs.pcie_d2h;
  if (from == tier::dram && to == tier::hbm)
    return &runs.pcie_h2d;
  if (from == tier::dram && to == tier::nvme)
    return &runs.nvme_write;
  if (from == tier::nvme && to == tier::dram)
    return &runs.nvme_read;
  return nullptr;
}

void count_runs(const transfer_batch& b, batch_runs& runs) {
  auto* link = link_of(runs, b.from, b.to);
  if (link == nullptr || b.moves.empty())
    return;
  bool lower_is_to = index_of(b.to) > index_of(b.from);
  auto lower_slot = [&](const slot_move& m) { return lower_is_to ? m.to_slot : m.from_slot; };
  uint64_t n = 1;
  for (size_t i = 1; i < b.moves.size(); ++i)
    n += lower_slot(b.moves[i]) == lower_slot(b.moves[i - 1]) + 1 ? 0 : 1;
  ++link->batches;
  link->blocks += b.moves.size();
  link->runs += n;
  if (b.background) {
    ++link->demotion_batches;
    link->demotion_blocks += b.moves.size();
    link->demotion_runs += n;
  }
}

} // namespace

void block_manager_state::queue_move(pending_move move) {
  // The one place a slot is read by a copy: its source must hold settled bytes.
  if (move.src != invalid_block && store(move.from).pool().state(move.src) == block_state::moving)
    ++metrics_->reads_while_moving;
  moves_.stage(move);
}

void block_manager_state::demote_ahead() {
  if (enabled(tier::dram))
    demote_tier(tier::hbm);
  if (enabled(tier::dram) && enabled(tier::nvme))
    demote_tier(tier::dram);
}

void block_manager_state::demote_tier(tier t) {
  tier lower = t == tier::hbm ? tier::dram : tier::nvme;
  auto& upper = store(t);
  auto& below = store(lower);
  auto& walked = walked_version_[index_of(t)];
  if (walked == upper.pool().queue_version() + 1)
    return; // nothing joined or left the free queue since the last walk
  auto window = static_cast<uint32_t>(options_.demote_watermark * upper.pool().capacity());
  // Only the dirty list needs work: every slot on it is the sole copy of its
  // block, or was until a copy below appeared (then it just moves to clean).
  // Inclusive: the window's worth of its LRU end is walked at every call, so
  // over time every block gets a copy below. Exclusive: it is walked only
  // while the clean end of the queue (slots allocation takes first, with
  // those on their way there) is short of the window: a block is copied down
  // when it is about to be evicted, so a block's copies overlap only there.
  auto walk = options_.exclusive ? max_demote_walk : std::min(window, max_demote_walk);
  auto short_of_window = [&] {
    return !options_.exclusive || upper.pool().clean_count() + moves_.demotions_in_flight(t) < window;
  };
  block_id id = upper.pool().first_dirty();
  for (uint32_t visited = 0; visited < walk && id != invalid_block && short_of_window(); ++visited) {
    if (below.pool().free_count() == 0 || !moves_.demotion_room(t))
      return; // try again once a slot frees up or a demotion lands
    block_id next = upper.pool().next_free(id);
    // The walk chases list links through a large pool: load the slot after
    // next, and the lower tiers' buckets for the next slot's block.
    if (next != invalid_block) {
      if (auto after = upper.pool().next_free(next); after != invalid_block)
        upper.pool().prefetch(after);
      if (const auto& nh = upper.pool().hash(next); !nh.empty())
        tiers_.prefetch(nh);
    }
    const auto h = upper.pool().hash(id);
    if (tiers_.slot_backed(t, id)) {
      upper.pool().mark_clean(id);
    } else {
      auto dst = tiers_.allocate(lower);
      if (!dst)
        return;
      below.pool().set_state(*dst, block_state::moving);
      below.index_as(*dst, h);
      upper.pin(id); // pinned by the move (off the free queue); stays readable
      queue_move({move_kind::demote, t, id, lower, *dst, h, 0, invalid_block});
      moves_.demotion_started(t);
    }
    id = next;
  }
  walked = upper.pool().queue_version() + 1; // +1: version 0 must not read as walked
}

std::vector<transfer_batch> block_manager_state::take_transfers() {
  auto batches = moves_.take_batches();
  for (auto& b : batches) {
    if (b.background && options_.placement == slot_placement_kind::contiguous) {
      // A demotion batch comes off a free list's LRU end, where a sequence's
      // blocks lie tail first (they are released tail first). Handed out head
      // first, they take ascending slots head first, so a prefix read later
      // in chain order (a promotion) is one run too.
      std::reverse(b.moves.begin(), b.moves.end());
      std::reverse(b.hashes.begin(), b.hashes.end());
    }
    // The moves name blocks; a batch leaves naming slots. Its destinations
    // below HBM get theirs now, together, from the tier's log of free slots
    // (runtime/free_extents.hpp), so the batch is as few runs as it can be.
    std::vector<block_id> dsts;
    dsts.reserve(b.moves.size());
    for (const auto& m : b.moves)
      dsts.push_back(block_id{m.to_slot});
    store(b.to).place(dsts);
    for (auto& m : b.moves) {
      m.from_slot = store(b.from).slot_of(block_id{m.from_slot});
      m.to_slot = store(b.to).slot_of(block_id{m.to_slot});
    }
    count_runs(b, metrics_->runs);
  }
  return batches;
}

std::vector<uint64_t> block_manager_state::on_transfer_done(uint64_t tag, bool ok) {
  std::vector<uint64_t> became_ready;
  auto moves = moves_.finish(tag);
  if (!ok)
    ++metrics_->failed_transfers;
  for (const auto& m : moves)
    finish_move(m, ok, became_ready);
  return became_ready;
}

void block_manager_state::wake_waiters(block_id hbm_slot, std::vector<uint64_t>& became_ready) {
  auto& waiting = waiters_[index_of(hbm_slot)];
  if (waiting.empty())
    return;
  std::vector<uint64_t> seqs;
  seqs.swap(waiting);
  for (auto seq : seqs) {
    auto s = sequences_.find(seq);
    if (s != sequences_.end() && --s->second.loading == 0)
      became_ready.push_back(seq);
  }
}

void block_manager_state::finish_move(const pending_move& m, bool ok, std::vector<uint64_t>& became_ready) {
  auto& dst = store(m.to);
  switch (m.kind) {
    case move_kind::demote:
      moves_.demotion_landed(m.from);
      if (!ok)
        dst.uncache(m.dst);
      else {
        ++metrics_->tiers[index_of(m.from)].demotions;
        dst.pool().set_state(m.dst, block_state::full);
        store(m.from).set_backed(m.src, true);
      }
      store(m.from).free(m.src); // clean now: joins the clean list
      dst.free(m.dst);
      return;
    case move_kind::promote: {
      if (m.src != invalid_block) // invalid: the second hop of a failed first one, never started
        store(m.from).free(m.src);
      if (m.to == tier::dram) { // first hop of an NVMe promotion
        if (!ok) {
          ++metrics_->corrupted_reads;
          dst.uncache(m.dst);
          dst.free(m.dst, block_pool::queue_end::least_recent);
          pending_move failed{move_kind::promote, tier::dram, invalid_block, tier::hbm, m.then_hbm, m.hash, 0,
                              invalid_block};
          finish_move(failed, false, became_ready);
          return;
        }
        dst.pool().set_state(m.dst, block_state::full);
        dst.set_backed(m.dst, !options_.exclusive);
        if (options_.exclusive)
          drop_copy(tier::nvme, m.src);
        ++metrics_->tiers[index_of(tier::nvme)].promotions;
        queue_move({move_kind::promote, tier::dram, m.dst, tier::hbm, m.then_hbm, m.hash, 0, invalid_block});
        return;
      }
      if (ok) {
        ++metrics_->tiers[index_of(m.from)].promotions;
        // Inclusive: the copy it came from stays cached below.
        dst.set_backed(m.dst, !options_.exclusive);
        if (options_.exclusive)
          drop_copy(m.from, m.src);
      }
      land_in_hbm(m.dst, ok, became_ready);
      return;
    }
    case move_kind::swap_out: {
      // Not yet told apart from a landed one: a failed swap-out still frees
      // the HBM copy, and the swap-in brings back what the DRAM slot holds.
      auto& s = sequences_.at(m.seq);
      dst.pool().set_state(m.dst, block_state::full);
      if (--s.loading == 0) {
        const auto& blocks = s.table.blocks();
        for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
          store(tier::hbm).free(*b);
        s.table = block_table(options_.block_tokens);
        table_changed(s, 0);
        became_ready.push_back(m.seq); // settled in DRAM: it may swap in now
      }
      return;
    }
    case move_kind::swap_in:
      store(m.from).free(m.src);
      land_in_hbm(m.dst, ok, became_ready);
      return;
    case move_kind::spill: {
      auto& s = sequences_.at(m.seq);
      if (ok) {
        dst.pool().set_state(m.dst, block_state::full);
      } else {
        dst.uncache(m.dst);
        s.spill_failed = true;
      }
      if (--s.loading == 0) {
        settle_spill(s);
        became_ready.push_back(m.seq); // its next grow finds the room
      }
      return;
    }
  }
}

void block_manager_state::drop_copy(tier t, block_id id) {
  auto& cache = store(t);
  if (id == invalid_block || cache.pool().ref_count(id) != 0 || cache.pool().hash(id).empty())
    return; // still read by a sequence or a move: it goes when evicted
  cache.uncache(id);
  cache.forget(id); // empty now: the first slot allocation takes
  ++cache.metrics().copies_dropped;
}

void block_manager_state::drop_copies_below(block_id hbm_slot) {
  const auto h = store(tier::hbm).pool().hash(hbm_slot);
  for (tier t : {tier::dram, tier::nvme})
    if (enabled(t))
      drop_copy(t, store(t).find(h));
  store(tier::hbm).set_backed(hbm_slot, tiers_.backed_below(tier::hbm, h));
}

void block_manager_state::land_in_hbm(block_id slot, bool ok, std::vector<uint64_t>& became_ready) {
  auto& hbm = store(tier::hbm);
  if (ok) {
    hbm.pool().set_state(slot, block_state::full);
  } else {
    // The block's bytes never arrived: every waiting sequence keeps only the
    // blocks before it and recomputes the rest. Later blocks of theirs that
    // are still in flight stay pinned by their own moves.
    hbm.uncache(slot);
    hbm.pool().set_state(slot, block_state::writing);
    for (auto seq : waiters_[index_of(slot)]) {
      auto& s = sequences_.at(seq);
      const auto& blocks = s.table.blocks();
      auto pos = std::find(blocks.begin(), blocks.end(), slot);
      if (pos != blocks.end()) {
        auto before = hbm.pool().free_count();
        const auto kept = static_cast<size_t>(pos - blocks.begin());
        table_changed(s, s.streamed.size() + kept);
        s.table.truncate(uint64_t{options_.block_tokens} * kept, hbm.pool());
        hbm.count_released(hbm.pool().free_count() - before);
      }
    }
  }
  wake_waiters(slot, became_ready);
  hbm.free(slot); // the move's reference
}

} // namespace kvtier
