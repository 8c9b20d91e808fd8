#include "actors/block_manager_state.hpp"

#include "runtime/check.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace kvtier {
namespace {

constexpr std::array<tier, 3> local_tiers{tier::hbm, tier::dram, tier::nvme};

// How far demote_ahead() walks a dirty list per call: bounds its cost per step.
constexpr uint32_t max_demote_walk = 512;

// Demotions in flight per tier. Their sources are pinned while they copy, so
// an unbounded number would starve allocation on a slow link; 64 blocks keep
// a PCIe Gen5 link busy for milliseconds, longer than a step.
constexpr uint32_t max_demotions_in_flight = 64;

} // namespace

block_manager_options block_manager_options_from(const config& cfg) {
  block_manager_options o;
  o.hbm_blocks = cfg.hbm_blocks();
  o.dram_blocks = cfg.dram_blocks();
  o.nvme_blocks = cfg.nvme_blocks();
  o.block_tokens = cfg.cache.block_tokens;
  o.demote_watermark = cfg.cache.demote_watermark;
  o.prefix_caching = cfg.cache.prefix_caching;
  return o;
}

block_manager_state::block_manager_state(const block_manager_options& options, block_metrics* metrics)
  : options_(options), metrics_(metrics) {
  KVTIER_CHECK(metrics_ != nullptr, "block_manager_state: metrics sink required");
  KVTIER_CHECK(options.hbm_blocks > 0, "block_manager_state: HBM needs at least one block");
  uint32_t counts[] = {options.hbm_blocks, options.dram_blocks, options.nvme_blocks};
  for (size_t i = 0; i < local_tiers.size(); ++i) {
    if (counts[i] > 0) {
      tiers_[i] = std::make_unique<tier_store>(counts[i], metrics_->tiers[i]);
      backed_[i].assign(counts[i], 0);
    }
    metrics_->tiers[i].capacity_blocks = counts[i];
  }
  waiters_.resize(options.hbm_blocks);
}

// -- slots ------------------------------------------------------------------------

std::optional<block_id> block_manager_state::allocate(tier t) {
  auto& s = store(t);
  auto a = s.pool.allocate();
  auto& m = metrics_->tiers[index_of(t)];
  if (!a) {
    ++m.allocation_failures;
    return std::nullopt;
  }
  if (!a->evicted.empty()) {
    s.index.erase(a->evicted);
    ++m.evictions;
    // Clean-list slots are backed unless their copy below was evicted since
    // (bit cleared); dirty ones may have gained a copy since.
    if ((a->sole_copy || !backed_[index_of(t)][index_of(a->id)]) && !backed_below(t, a->evicted))
      ++m.evictions_lost;
    if (t != tier::hbm)
      unback_above(t, a->evicted);
  }
  backed_[index_of(t)][index_of(a->id)] = 0;
  ++s.allocated;
  note_usage(t);
  return a->id;
}

void block_manager_state::free_slot(tier t, block_id id, block_pool::queue_end end) {
  auto& s = store(t);
  bool backed = backed_[index_of(t)][index_of(id)] && !s.pool.hash(id).empty();
  if (backed ? s.pool.release_backed(id, end) : s.pool.release(id, end)) {
    ++s.freed;
  }
}

void block_manager_state::note_usage(tier t) {
  auto& m = metrics_->tiers[index_of(t)];
  m.peak_used_blocks = std::max<uint64_t>(m.peak_used_blocks, store(t).pool.used_count());
}

bool block_manager_state::backed_below(tier t, const block_hash& hash) const {
  for (auto lower = index_of(t) + 1; lower < local_tiers.size(); ++lower)
    if (tiers_[lower] && tiers_[lower]->index.find(hash) != invalid_block)
      return true;
  return false;
}

bool block_manager_state::slot_backed(tier t, block_id id) {
  auto& bit = backed_[index_of(t)][index_of(id)];
  if (!bit) {
    const auto& h = store(t).pool.hash(id);
    bit = !h.empty() && backed_below(t, h);
  }
  return bit;
}

void block_manager_state::unback_above(tier t, const block_hash& hash) {
  // Only the nearest tier above that still holds the block can lose its
  // backing: every tier above that one stays backed by it.
  for (size_t upper = index_of(t); upper-- > 0;) {
    if (!tiers_[upper])
      continue;
    auto id = tiers_[upper]->index.find(hash);
    if (id == invalid_block)
      continue;
    // The lower tier judged this block its coldest: the upper copy stays where
    // it is (a free one on the clean list, evicted early) and is not demoted
    // again, which would only push out another cold block below — with a lower
    // tier smaller than the one above, forever.
    if (backed_[upper][index_of(id)] && !backed_below(t, hash))
      backed_[upper][index_of(id)] = 0;
    return;
  }
}

uint32_t block_manager_state::free_blocks(tier t) const {
  return enabled(t) ? store(t).pool.free_count() : 0;
}

block_id block_manager_state::find(tier t, const block_hash& hash) const {
  return enabled(t) ? store(t).index.find(hash) : invalid_block;
}

void block_manager_state::queue_move(pending_move move) {
  staged_.push_back(move);
}

void block_manager_state::wait_for(uint64_t seq, block_id hbm_slot) {
  waiters_[index_of(hbm_slot)].push_back(seq);
  ++sequences_.at(seq).loading;
}

// -- sequences ----------------------------------------------------------------------

admit_result block_manager_state::admit(uint64_t seq, std::vector<block_hash> chain, uint64_t prompt_tokens) {
  KVTIER_CHECK(!registered(seq), "block_manager_state::admit: sequence already registered");
  const uint32_t B = options_.block_tokens;
  admit_result result;

  // Pass 1: find the cached prefix without changing anything.
  struct hit {
    tier where;
    block_id id;
  };
  std::vector<hit> hits;
  uint32_t promotions = 0, nvme_hits = 0, revived = 0;
  if (options_.prefix_caching) {
    for (const auto& h : chain) {
      std::optional<hit> found;
      for (auto t : local_tiers) {
        if (!enabled(t))
          continue;
        if (auto id = store(t).index.find(h); id != invalid_block) {
          found = hit{t, id};
          break;
        }
      }
      if (!found)
        break;
      if (found->where == tier::hbm) {
        revived += store(tier::hbm).pool.ref_count(found->id) == 0 ? 1 : 0;
      } else {
        ++promotions;
        nvme_hits += found->where == tier::nvme ? 1 : 0;
        // A second hop through DRAM needs a DRAM slot; stop the prefix where there is none.
        if (found->where == tier::nvme && (!enabled(tier::dram) || nvme_hits > free_blocks(tier::dram))) {
          --promotions;
          break;
        }
      }
      hits.push_back(*found);
    }
  }
  // NVMe hits need a DRAM slot each, after DRAM hits revived from the free queue.
  uint32_t dram_revived = 0;
  for (const auto& h : hits)
    if (h.where == tier::dram && store(tier::dram).pool.ref_count(h.id) == 0)
      ++dram_revived;
  if (nvme_hits > 0 && nvme_hits + dram_revived > free_blocks(tier::dram)) {
    auto first_nvme = std::find_if(hits.begin(), hits.end(), [](const hit& h) { return h.where == tier::nvme; });
    promotions -= static_cast<uint32_t>(std::count_if(first_nvme, hits.end(), [](const hit& h) { return h.where != tier::hbm; }));
    revived -= static_cast<uint32_t>(std::count_if(first_nvme, hits.end(), [&](const hit& h) {
      return h.where == tier::hbm && store(tier::hbm).pool.ref_count(h.id) == 0;
    }));
    hits.erase(first_nvme, hits.end());
  }
  auto& hbm = store(tier::hbm);
  if (promotions + revived > hbm.pool.free_count()) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    result.status = admit_status::no_room;
    return result;
  }

  // Pass 2: commit.
  auto [it, inserted] = sequences_.emplace(seq, sequence(B));
  auto& s = it->second;
  s.prompt_tokens = prompt_tokens;
  // Pin every hit before allocating anything, so no allocation can evict a
  // block this prefix is about to use.
  auto pin = [&](tier t, block_id id) {
    auto& st = store(t);
    auto before = st.pool.free_count();
    st.pool.ref(id);
    if (st.pool.free_count() < before) {
      ++st.allocated;
      note_usage(t);
    }
  };
  for (const auto& h : hits)
    pin(h.where, h.id); // HBM: the sequence's reference; lower tiers: the move's
  std::vector<block_id> blocks;
  blocks.reserve(hits.size());
  for (size_t i = 0; i < hits.size(); ++i) {
    const auto& h = chain[i];
    auto [where, id] = hits[i];
    ++result.hits_by_tier[index_of(where)];
    ++metrics_->tiers[index_of(where)].prefix_hit_blocks;
    if (where == tier::hbm) {
      if (hbm.pool.state(id) == block_state::moving)
        wait_for(seq, id);
      blocks.push_back(id);
      continue;
    }
    auto dst = allocate(tier::hbm);
    KVTIER_CHECK(dst, "admit: pass 1 promised an HBM slot");
    hbm.pool.set_state(*dst, block_state::moving);
    hbm.pool.set_hash(*dst, h);
    hbm.index.insert(h, *dst);
    if (where == tier::dram) {
      queue_move({move_kind::promote, tier::dram, id, tier::hbm, *dst, h, 0, invalid_block});
    } else {
      auto mid = allocate(tier::dram);
      KVTIER_CHECK(mid, "admit: pass 1 promised a DRAM slot");
      auto& dram = store(tier::dram);
      dram.pool.set_state(*mid, block_state::moving);
      dram.pool.set_hash(*mid, h);
      dram.index.insert(h, *mid);
      queue_move({move_kind::promote, tier::nvme, id, tier::dram, *mid, h, 0, *dst});
    }
    wait_for(seq, *dst);
    blocks.push_back(*dst);
  }
  metrics_->prompt_blocks += chain.size();
  metrics_->miss_blocks += chain.size() - hits.size();
  result.hit_blocks = static_cast<uint32_t>(hits.size());
  result.hit_tokens = std::min<uint64_t>(uint64_t{B} * hits.size(), prompt_tokens);
  s.table.adopt_prefix(std::move(blocks), result.hit_tokens);
  s.chain = std::move(chain);
  result.status = s.loading > 0 ? admit_status::loading : admit_status::ready;
  return result;
}

uint32_t block_manager_state::blocks_needed(uint64_t seq, uint32_t tokens) const {
  const auto& s = sequences_.at(seq);
  const auto& t = s.table;
  const uint32_t B = options_.block_tokens;
  if (tokens == 0)
    return 0;
  uint64_t room = t.blocks().empty() ? 0 : B - t.tail_tokens();
  const auto& pool = store(tier::hbm).pool;
  bool cow = room > 0 && (pool.ref_count(t.blocks().back()) > 1 || !pool.hash(t.blocks().back()).empty());
  uint64_t spill = tokens > room ? tokens - room : 0;
  return static_cast<uint32_t>((spill + B - 1) / B + (cow ? 1 : 0));
}

bool block_manager_state::grow(uint64_t seq, uint32_t tokens) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::grow: sequence is not resident");
  auto& hbm = store(tier::hbm);
  auto before = hbm.pool.free_count();
  uint64_t old_tokens = s.table.tokens();
  auto appended = s.table.append(tokens, hbm.pool);
  if (!appended) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    return false;
  }
  auto& hm = metrics_->tiers[index_of(tier::hbm)];
  for (const auto& h : appended->evicted) {
    hbm.index.erase(h);
    ++hm.evictions;
    if (appended->evicted_sole_copies > 0 && !backed_below(tier::hbm, h))
      ++hm.evictions_lost;
  }
  for (auto id : appended->new_blocks)
    backed_[index_of(tier::hbm)][index_of(id)] = 0;
  // Copy-on-write released the old tail, so count slots taken net of it.
  uint64_t taken = appended->new_blocks.size();
  hbm.allocated += taken;
  uint64_t released = hbm.pool.free_count() + taken - before;
  hbm.freed += released;
  if (taken)
    note_usage(tier::hbm);
  index_full_blocks(s, seq, old_tokens);
  return true;
}

void block_manager_state::index_full_blocks(sequence& s, uint64_t, uint64_t from_tokens) {
  if (!options_.prefix_caching)
    return;
  const uint64_t B = options_.block_tokens;
  const uint64_t now = s.table.tokens();
  auto& hbm = store(tier::hbm);
  // Block j is complete when it is full, or when it ends the prompt.
  auto complete = [&](uint64_t j, uint64_t tokens) {
    uint64_t end = std::min((j + 1) * B, s.prompt_tokens);
    return j < s.chain.size() && tokens >= end;
  };
  uint64_t first = from_tokens / B;
  for (uint64_t j = first; j < s.chain.size() && complete(j, now); ++j) {
    if (complete(j, from_tokens))
      continue;
    auto id = s.table.blocks()[j];
    const auto& h = s.chain[j];
    if (hbm.pool.hash(id).empty() && hbm.index.find(h) == invalid_block) {
      hbm.pool.set_hash(id, h);
      hbm.pool.set_state(id, block_state::full);
      hbm.index.insert(h, id);
    }
  }
}

bool block_manager_state::ready(uint64_t seq) const {
  return sequences_.at(seq).loading == 0;
}

bool block_manager_state::swapped(uint64_t seq) const {
  return sequences_.at(seq).swapped;
}

uint64_t block_manager_state::tokens(uint64_t seq) const {
  const auto& s = sequences_.at(seq);
  return s.swapped ? s.swapped_tokens : s.table.tokens();
}

uint32_t block_manager_state::hbm_block_count(uint64_t seq) const {
  return static_cast<uint32_t>(sequences_.at(seq).table.blocks().size());
}

void block_manager_state::release(uint64_t seq) {
  auto it = sequences_.find(seq);
  KVTIER_CHECK(it != sequences_.end(), "block_manager_state::release: unknown sequence");
  auto& s = it->second;
  KVTIER_CHECK(s.loading == 0, "block_manager_state::release: sequence has blocks in flight");
  if (s.swapped) {
    for (auto it2 = s.dram_blocks.rbegin(); it2 != s.dram_blocks.rend(); ++it2)
      free_slot(tier::dram, *it2);
  } else {
    const auto& blocks = s.table.blocks();
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
      free_slot(tier::hbm, *b);
  }
  sequences_.erase(it);
}

preempt_mode block_manager_state::preempt(uint64_t seq, preempt_mode wanted) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::preempt: sequence is not resident");
  if (wanted == preempt_mode::swap && enabled(tier::dram)) {
    auto& dram = store(tier::dram);
    auto& hbm = store(tier::hbm);
    const auto& blocks = s.table.blocks();
    // Blocks with a settled DRAM copy are pinned there first (so no
    // allocation below can evict them); the rest are copied.
    std::vector<block_id> placed(blocks.size(), invalid_block);
    uint32_t copies = 0;
    for (size_t i = 0; i < blocks.size(); ++i) {
      const auto& h = hbm.pool.hash(blocks[i]);
      auto clean = h.empty() ? invalid_block : dram.index.find(h);
      if (clean != invalid_block && dram.pool.state(clean) != block_state::moving) {
        auto before = dram.pool.free_count();
        dram.pool.ref(clean);
        if (dram.pool.free_count() < before) {
          ++dram.allocated;
        }
        placed[i] = clean;
      } else {
        ++copies;
      }
    }
    if (copies > dram.pool.free_count()) {
      for (auto b : placed)
        if (b != invalid_block)
          free_slot(tier::dram, b);
    } else {
      for (size_t i = 0; i < blocks.size(); ++i) {
        if (placed[i] != invalid_block)
          continue;
        auto dst = allocate(tier::dram);
        KVTIER_CHECK(dst, "preempt: free_count promised a DRAM slot");
        dram.pool.set_state(*dst, block_state::moving);
        // A hashed block's DRAM copy also serves the prefix cache once it lands.
        const auto& h = hbm.pool.hash(blocks[i]);
        if (!h.empty() && dram.index.find(h) == invalid_block) {
          dram.pool.set_hash(*dst, h);
          dram.index.insert(h, *dst);
        }
        placed[i] = *dst;
        queue_move({move_kind::swap_out, tier::hbm, blocks[i], tier::dram, *dst, hbm.pool.hash(blocks[i]), seq,
                    invalid_block});
        ++s.loading;
      }
      s.dram_blocks = std::move(placed);
      s.swapped = true;
      s.swapped_tokens = s.table.tokens();
      metrics_->swapped_out_blocks += blocks.size();
      if (s.loading == 0) {
        for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
          free_slot(tier::hbm, *b);
        s.table = block_table(options_.block_tokens);
      }
      return preempt_mode::swap;
    }
  }
  release(seq);
  return preempt_mode::recompute;
}

admit_status block_manager_state::swap_in(uint64_t seq) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(s.swapped, "block_manager_state::swap_in: sequence is not swapped");
  if (s.loading > 0)
    return admit_status::no_room; // still on its way out: try again once on_transfer_done reports it
  auto& hbm = store(tier::hbm);
  if (s.dram_blocks.size() > hbm.pool.free_count()) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    return admit_status::no_room;
  }
  auto& dram = store(tier::dram);
  std::vector<block_id> blocks;
  blocks.reserve(s.dram_blocks.size());
  std::vector<std::pair<block_id, block_id>> to_copy;
  for (auto src : s.dram_blocks) {
    const auto& h = dram.pool.hash(src);
    auto resident = h.empty() ? invalid_block : hbm.index.find(h);
    if (resident != invalid_block) {
      auto before = hbm.pool.free_count();
      hbm.pool.ref(resident);
      if (hbm.pool.free_count() < before) {
        ++hbm.allocated;
      }
      blocks.push_back(resident);
      free_slot(tier::dram, src);
      if (hbm.pool.state(resident) == block_state::moving)
        to_copy.emplace_back(invalid_block, resident); // wait on someone else's move
      continue;
    }
    auto dst = allocate(tier::hbm);
    KVTIER_CHECK(dst, "swap_in: free_count promised a slot");
    hbm.pool.set_state(*dst, block_state::moving);
    if (!h.empty()) {
      hbm.pool.set_hash(*dst, h);
      hbm.index.insert(h, *dst);
    }
    blocks.push_back(*dst);
    to_copy.emplace_back(src, *dst);
  }
  s.table = block_table(options_.block_tokens);
  s.table.adopt_prefix(std::move(blocks), s.swapped_tokens);
  s.swapped = false;
  s.dram_blocks.clear();
  metrics_->swapped_in_blocks += s.table.blocks().size();
  for (auto [src, dst] : to_copy) {
    if (src != invalid_block)
      queue_move({move_kind::swap_in, tier::dram, src, tier::hbm, dst, dram.pool.hash(src), seq, invalid_block});
    wait_for(seq, dst);
  }
  return s.loading > 0 ? admit_status::loading : admit_status::ready;
}

uint64_t block_manager_state::compact(uint64_t seq, uint64_t keep_tokens) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::compact: sequence is not resident");
  auto& hbm = store(tier::hbm);
  auto before = hbm.pool.free_count();
  s.table.truncate(keep_tokens, hbm.pool);
  // Compacted KV is no longer the prompt's exact prefix: nothing past what
  // was kept may be shared through the index.
  s.chain.resize(std::min<size_t>(s.chain.size(), keep_tokens / options_.block_tokens));
  auto freed = hbm.pool.free_count() - before;
  hbm.freed += freed;
  return s.table.tokens();
}

// -- transfers ----------------------------------------------------------------------

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
  if (walked == upper.pool.queue_version() + 1)
    return; // nothing joined or left the free queue since the last walk
  auto window = static_cast<uint32_t>(options_.demote_watermark * upper.pool.capacity());
  window = std::min(window, max_demote_walk);
  // Only the dirty list needs work: every slot on it is the sole copy of its
  // block, or was until a copy below appeared (then it just moves to clean).
  block_id id = upper.pool.first_dirty();
  for (uint32_t visited = 0; visited < window && id != invalid_block; ++visited) {
    if (below.pool.free_count() == 0 || demotions_in_flight_[index_of(t)] >= max_demotions_in_flight)
      return; // try again once a slot frees up or a demotion lands
    block_id next = upper.pool.next_free(id);
    const auto h = upper.pool.hash(id);
    if (slot_backed(t, id)) {
      upper.pool.mark_clean(id);
    } else {
      auto dst = allocate(lower);
      if (!dst)
        return;
      below.pool.set_state(*dst, block_state::moving);
      below.pool.set_hash(*dst, h);
      below.index.insert(h, *dst);
      upper.pool.ref(id); // pinned by the move (off the free queue); stays readable
      ++upper.allocated;
      queue_move({move_kind::demote, t, id, lower, *dst, h, 0, invalid_block});
      ++demotions_in_flight_[index_of(t)];
    }
    id = next;
  }
  walked = upper.pool.queue_version() + 1; // +1: version 0 must not read as walked
}

std::vector<transfer_batch> block_manager_state::take_transfers() {
  std::vector<transfer_batch> out;
  if (staged_.empty())
    return out;
  // One batch per (from, to) link, in first-seen order.
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

std::vector<uint64_t> block_manager_state::on_transfer_done(uint64_t tag, bool ok) {
  std::vector<uint64_t> became_ready;
  auto it = in_flight_.find(tag);
  KVTIER_CHECK(it != in_flight_.end(), "on_transfer_done: unknown transfer tag");
  auto moves = std::move(it->second);
  in_flight_.erase(it);
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
  auto invalidate = [&](tier t, block_id id) {
    auto& st = store(t);
    if (!st.pool.hash(id).empty() && st.index.find(st.pool.hash(id)) == id)
      st.index.erase(st.pool.hash(id));
    st.pool.set_hash(id, {});
  };
  switch (m.kind) {
    case move_kind::demote:
      --demotions_in_flight_[index_of(m.from)];
      if (!ok)
        invalidate(m.to, m.dst);
      else {
        ++metrics_->tiers[index_of(m.from)].demotions;
        dst.pool.set_state(m.dst, block_state::full);
        backed_[index_of(m.from)][index_of(m.src)] = 1;
      }
      free_slot(m.from, m.src); // clean now: joins the clean list
      free_slot(m.to, m.dst);
      return;
    case move_kind::promote: {
      free_slot(m.from, m.src);
      if (m.to == tier::dram) { // first hop of an NVMe promotion
        if (!ok) {
          ++metrics_->corrupted_reads;
          invalidate(tier::dram, m.dst);
          free_slot(tier::dram, m.dst, block_pool::queue_end::least_recent);
          pending_move failed{move_kind::promote, tier::dram, invalid_block, tier::hbm, m.then_hbm, m.hash, 0,
                              invalid_block};
          finish_move(failed, false, became_ready);
          return;
        }
        dst.pool.set_state(m.dst, block_state::full);
        backed_[index_of(tier::dram)][index_of(m.dst)] = 1;
        ++metrics_->tiers[index_of(tier::nvme)].promotions;
        queue_move({move_kind::promote, tier::dram, m.dst, tier::hbm, m.then_hbm, m.hash, 0, invalid_block});
        return;
      }
      if (ok) {
        ++metrics_->tiers[index_of(m.from)].promotions;
        dst.pool.set_state(m.dst, block_state::full);
        backed_[index_of(m.to)][index_of(m.dst)] = 1; // the copy it came from stays cached below
        wake_waiters(m.dst, became_ready);
        return;
      }
      // The block's bytes never arrived: every waiting sequence keeps only
      // the blocks before it and recomputes the rest.
      invalidate(tier::hbm, m.dst);
      if (dst.pool.ref_count(m.dst) > 0)
        dst.pool.set_state(m.dst, block_state::writing);
      for (auto seq : waiters_[index_of(m.dst)]) {
          auto& s = sequences_.at(seq);
          const auto& blocks = s.table.blocks();
          auto pos = std::find(blocks.begin(), blocks.end(), m.dst);
          if (pos != blocks.end()) {
            auto before = dst.pool.free_count();
            s.table.truncate(uint64_t{options_.block_tokens} * static_cast<uint64_t>(pos - blocks.begin()), dst.pool);
            dst.freed += dst.pool.free_count() - before;
          }
        }
      wake_waiters(m.dst, became_ready);
      return;
    }
    case move_kind::swap_out: {
      auto& s = sequences_.at(m.seq);
      dst.pool.set_state(m.dst, block_state::full);
      if (--s.loading == 0) {
        const auto& blocks = s.table.blocks();
        for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
          free_slot(tier::hbm, *b);
        s.table = block_table(options_.block_tokens);
        became_ready.push_back(m.seq); // settled in DRAM: it may swap in now
      }
      return;
    }
    case move_kind::swap_in:
      free_slot(m.from, m.src);
      dst.pool.set_state(m.dst, block_state::full);
      wake_waiters(m.dst, became_ready);
      return;
  }
}

// -- observation ----------------------------------------------------------------------

uint64_t block_manager_state::fragmentation_tokens() const {
  uint64_t unused = 0;
  for (const auto& [id, s] : sequences_)
    if (!s.swapped && !s.table.blocks().empty())
      unused += options_.block_tokens - s.table.tail_tokens();
  return unused;
}

std::string block_manager_state::check_conservation() const {
  for (auto t : local_tiers) {
    if (!enabled(t))
      continue;
    const auto& s = store(t);
    if (s.allocated != s.freed + s.pool.used_count())
      return fmt::format("{}: allocated {} != freed {} + resident {}", name_of(t), s.allocated, s.freed,
                         s.pool.used_count());
    // Every reference is held by a sequence or a move.
    std::vector<uint32_t> expected(s.pool.capacity(), 0);
    for (const auto& [id, seq] : sequences_) {
      if (t == tier::hbm)
        for (auto b : seq.table.blocks())
          ++expected[index_of(b)];
      if (t == tier::dram)
        for (auto b : seq.dram_blocks)
          ++expected[index_of(b)];
    }
    auto count_move = [&](const pending_move& m) {
      if (m.from == t && m.src != invalid_block && m.kind != move_kind::swap_out)
        ++expected[index_of(m.src)];
      if (m.to == t && (m.kind == move_kind::demote || (m.kind == move_kind::promote && m.to == tier::dram)))
        ++expected[index_of(m.dst)];
    };
    for (const auto& m : staged_)
      count_move(m);
    for (const auto& [tag, moves] : in_flight_)
      for (const auto& m : moves)
        count_move(m);
    for (uint32_t i = 0; i < s.pool.capacity(); ++i)
      if (s.pool.ref_count(block_id{i}) != expected[i])
        return fmt::format("{} slot {}: ref_count {} but {} holders", name_of(t), i, s.pool.ref_count(block_id{i}),
                           expected[i]);
  }
  return {};
}

} // namespace kvtier
