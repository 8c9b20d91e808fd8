#include "actors/block_manager_state.hpp"

#include "runtime/check.hpp"

#include <algorithm>
#include <utility>

namespace kvtier {
namespace {

// Loops over a chain's blocks load the index buckets of the block this many
// places ahead: far enough for a cache miss to land, near enough to stay cached.
constexpr size_t lookahead = 8;

block_metrics& required(block_metrics* metrics) {
  KVTIER_CHECK(metrics != nullptr, "block_manager_state: metrics sink required");
  return *metrics;
}

} // namespace

block_manager_options block_manager_options_from(const config& cfg) {
  block_manager_options o;
  o.hbm_blocks = cfg.hbm_blocks();
  o.dram_blocks = cfg.dram_blocks();
  o.nvme_blocks = cfg.lowest_tier_blocks(); // the NVMe tier, or the remote tier in its place
  o.block_tokens = cfg.cache.block_tokens;
  o.demote_watermark = cfg.cache.demote_watermark;
  o.prefix_caching = cfg.cache.prefix_caching;
  o.exclusive = cfg.cache.hierarchy == cache_hierarchy::exclusive;
  o.policy = cfg.cache.policy;
  o.placement = cfg.cache.slot_placement;
  o.stream_from_dram = cfg.streams_from_dram();
  o.stream_recent_blocks = cfg.stream_recent_blocks();
  return o;
}

block_manager_state::block_manager_state(const block_manager_options& options, block_metrics* metrics)
    : options_(options),
      metrics_(metrics),
      tiers_({options.hbm_blocks, options.dram_blocks, options.nvme_blocks}, required(metrics),
             {tier_policy_kind(options.policy), options.demote_watermark}, options.placement) {
  KVTIER_CHECK(options.hbm_blocks > 0, "block_manager_state: HBM needs at least one block");
  waiters_.resize(options.hbm_blocks);
}

size_t block_manager_state::adopt_nvme_blocks(std::span<const recovered_block> blocks) {
  if (!enabled(tier::nvme))
    return 0;
  size_t adopted = 0;
  for (const auto& b : blocks)
    adopted += store(tier::nvme).adopt(b.nvme_slot, b.hash) ? 1 : 0;
  return adopted;
}

uint32_t block_manager_state::free_blocks(tier t) const {
  return enabled(t) ? store(t).pool().free_count() : 0;
}

block_id block_manager_state::find(tier t, const block_hash& hash) const {
  return tiers_.find(t, hash);
}

void block_manager_state::wait_for(uint64_t seq, block_id hbm_slot) {
  waiters_[index_of(hbm_slot)].push_back(seq);
  ++sequences_.at(seq).loading;
}

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
    for (size_t i = 0; i < chain.size(); ++i) {
      if (i + lookahead < chain.size())
        tiers_.prefetch(chain[i + lookahead]);
      const auto& h = chain[i];
      std::optional<hit> found;
      for (auto t : local_tiers) {
        if (!enabled(t))
          continue;
        if (auto id = store(t).find(h); id != invalid_block) {
          found = hit{t, id};
          break;
        }
      }
      if (!found)
        break;
      if (found->where == tier::hbm) {
        revived += store(tier::hbm).pool().ref_count(found->id) == 0 ? 1 : 0;
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
    if (h.where == tier::dram && store(tier::dram).pool().ref_count(h.id) == 0)
      ++dram_revived;
  if (nvme_hits > 0 && nvme_hits + dram_revived > free_blocks(tier::dram)) {
    auto first_nvme = std::find_if(hits.begin(), hits.end(), [](const hit& h) { return h.where == tier::nvme; });
    promotions -=
        static_cast<uint32_t>(std::count_if(first_nvme, hits.end(), [](const hit& h) { return h.where != tier::hbm; }));
    revived -= static_cast<uint32_t>(std::count_if(first_nvme, hits.end(), [&](const hit& h) {
      return h.where == tier::hbm && store(tier::hbm).pool().ref_count(h.id) == 0;
    }));
    hits.erase(first_nvme, hits.end());
  }
  auto& hbm = store(tier::hbm);
  // A prompt HBM cannot hold whole (a long sequence coming back after a
  // recompute preemption, or sharing a long cached prefix) leaves the
  // leading DRAM hits that do not fit where they are and streams them.
  uint32_t streamed = 0;
  const uint64_t prompt_blocks = (prompt_tokens + B - 1) / B;
  if (promotions + revived > hbm.pool().free_count() && options_.stream_from_dram && enabled(tier::dram) &&
      prompt_blocks > options_.hbm_blocks) {
    uint64_t over = promotions + revived - hbm.pool().free_count();
    uint64_t full_hits = std::min<uint64_t>(hits.size(), prompt_tokens / B);
    uint64_t cold = full_hits > options_.stream_recent_blocks ? full_hits - options_.stream_recent_blocks : 0;
    const auto& dram = store(tier::dram).pool();
    while (streamed < cold && streamed < over && hits[streamed].where == tier::dram &&
           dram.state(hits[streamed].id) != block_state::moving)
      ++streamed;
    promotions -= streamed;
    // What still cannot come up is computed again instead: a prompt larger
    // than HBM must not wait for room that nothing running will free.
    while (hits.size() > streamed && promotions + revived > hbm.pool().free_count()) {
      const auto& last = hits.back();
      if (last.where != tier::hbm)
        --promotions;
      else if (hbm.pool().ref_count(last.id) == 0)
        --revived;
      hits.pop_back();
    }
  }
  if (promotions + revived > hbm.pool().free_count()) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    result.status = admit_status::no_room;
    return result;
  }

  // Pass 2: commit.
  tiers_.note_request(chain, hits.size());
  auto [it, inserted] = sequences_.emplace(seq, sequence(B));
  auto& s = it->second;
  s.prompt_tokens = prompt_tokens;
  // Pin every hit before allocating anything, so no allocation can evict a
  // block this prefix is about to use.
  auto pin = [&](tier t, block_id id) {
    if (store(t).pin(id))
      store(t).note_usage();
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
    if (i < streamed) {
      s.streamed.push_back(id); // the pin above is the sequence's reference
      continue;
    }
    if (where == tier::hbm) {
      if (hbm.pool().state(id) == block_state::moving)
        wait_for(seq, id);
      else if (options_.exclusive && hbm.backed(id))
        drop_copies_below(id);
      blocks.push_back(id);
      continue;
    }
    auto dst = tiers_.allocate(tier::hbm);
    KVTIER_CHECK(dst, "admit: pass 1 promised an HBM slot");
    hbm.pool().set_state(*dst, block_state::moving);
    hbm.index_as(*dst, h);
    hbm.pin(*dst); // the move's reference, until it lands
    if (where == tier::dram) {
      queue_move({move_kind::promote, tier::dram, id, tier::hbm, *dst, h, 0, invalid_block});
    } else {
      auto mid = tiers_.allocate(tier::dram);
      KVTIER_CHECK(mid, "admit: pass 1 promised a DRAM slot");
      auto& dram = store(tier::dram);
      dram.pool().set_state(*mid, block_state::moving);
      dram.index_as(*mid, h);
      queue_move({move_kind::promote, tier::nvme, id, tier::dram, *mid, h, 0, *dst});
    }
    wait_for(seq, *dst);
    blocks.push_back(*dst);
  }
  metrics_->prompt_blocks += chain.size();
  metrics_->miss_blocks += chain.size() - hits.size();
  result.hit_blocks = static_cast<uint32_t>(hits.size());
  result.hit_tokens = std::min<uint64_t>(uint64_t{B} * hits.size(), prompt_tokens);
  s.table.adopt_prefix(std::move(blocks), result.hit_tokens - s.streamed_tokens());
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
  const auto& pool = store(tier::hbm).pool();
  bool cow = room > 0 && (pool.ref_count(t.blocks().back()) > 1 || !pool.hash(t.blocks().back()).empty());
  uint64_t spill = tokens > room ? tokens - room : 0;
  return static_cast<uint32_t>((spill + B - 1) / B + (cow ? 1 : 0));
}

bool block_manager_state::grow(uint64_t seq, uint32_t tokens) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::grow: sequence is not resident");
  auto& hbm = store(tier::hbm);
  auto before = hbm.pool().free_count();
  uint64_t old_tokens = s.all_tokens();
  const size_t old_entries = s.streamed.size() + s.table.blocks().size();
  hbm.make_room(blocks_needed(seq, tokens));
  auto appended = s.table.append(tokens, hbm.pool());
  if (!appended) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    return false;
  }
  if (!appended->copies.empty())
    table_changed(s, old_entries - 1); // the partial tail moved to its copy
  const auto& evicted = appended->evicted;
  for (size_t i = 0; i < evicted.size(); ++i) {
    if (i + lookahead < evicted.size())
      tiers_.prefetch(evicted[i + lookahead]);
    tiers_.count_eviction(tier::hbm, evicted[i], appended->evicted_sole_copies > 0);
  }
  for (auto id : appended->new_blocks)
    hbm.set_backed(id, false);
  for (const auto& c : appended->copies)
    copies_.push_back({index_of(c.from), index_of(c.to), c.tokens});
  // Copy-on-write released the old tail, so count slots taken net of it.
  uint64_t taken = appended->new_blocks.size();
  hbm.count_taken(taken);
  hbm.count_released(hbm.pool().free_count() + taken - before);
  if (taken)
    hbm.note_usage();
  index_full_blocks(s, seq, old_tokens);
  return true;
}

void block_manager_state::index_full_blocks(sequence& s, uint64_t, uint64_t from_tokens) {
  if (!options_.prefix_caching)
    return;
  const uint64_t B = options_.block_tokens;
  const uint64_t now = s.all_tokens();
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
    auto id = s.table.blocks()[j - s.streamed.size()]; // j >= streamed: those were complete already
    const auto& h = s.chain[j];
    if (hbm.pool().hash(id).empty() && hbm.find(h) == invalid_block) {
      hbm.pool().set_state(id, block_state::full);
      hbm.index_as(id, h);
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
  return (s.swapped ? s.swapped_tokens : s.all_tokens()) + s.dropped_tokens;
}

uint32_t block_manager_state::hbm_block_count(uint64_t seq) const {
  return static_cast<uint32_t>(sequences_.at(seq).table.blocks().size());
}

std::vector<uint32_t> block_manager_state::hbm_slots(uint64_t seq) const {
  const auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped, "block_manager_state::hbm_slots: sequence is swapped out");
  std::vector<uint32_t> slots;
  slots.reserve(s.streamed.size() + s.table.blocks().size());
  for (auto id : s.streamed)
    slots.push_back(streamed_slot_bit | store(tier::dram).slot_of(id));
  for (auto id : s.table.blocks())
    slots.push_back(index_of(id));
  return slots;
}

block_manager_state::table_update block_manager_state::take_table_update(uint64_t seq) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped, "block_manager_state::take_table_update: sequence is swapped out");
  const size_t streamed = s.streamed.size(), entries = streamed + s.table.blocks().size();
  KVTIER_CHECK(s.reported <= entries, "block_manager_state: a table shrank without saying where");
  table_update out;
  out.from = s.reported;
  out.entries.reserve(entries - s.reported);
  for (size_t i = s.reported; i < streamed; ++i)
    out.entries.push_back(streamed_slot_bit | store(tier::dram).slot_of(s.streamed[i]));
  for (size_t i = std::max(size_t{s.reported}, streamed); i < entries; ++i)
    out.entries.push_back(index_of(s.table.blocks()[i - streamed]));
  s.reported = static_cast<uint32_t>(entries);
  return out;
}

std::vector<slot_copy> block_manager_state::take_copies() {
  return std::exchange(copies_, {});
}

void block_manager_state::release(uint64_t seq) {
  auto it = sequences_.find(seq);
  KVTIER_CHECK(it != sequences_.end(), "block_manager_state::release: unknown sequence");
  auto& s = it->second;
  KVTIER_CHECK(s.loading == 0, "block_manager_state::release: sequence has blocks in flight");
  if (s.swapped) {
    for (auto it2 = s.dram_blocks.rbegin(); it2 != s.dram_blocks.rend(); ++it2)
      store(tier::dram).free(*it2);
  } else {
    const auto& blocks = s.table.blocks();
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
      store(tier::hbm).free(*b);
  }
  for (auto b = s.streamed.rbegin(); b != s.streamed.rend(); ++b)
    store(tier::dram).free(*b);
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
      const auto& h = hbm.pool().hash(blocks[i]);
      auto clean = h.empty() ? invalid_block : dram.find(h);
      if (clean != invalid_block && dram.pool().state(clean) != block_state::moving) {
        dram.pin(clean);
        placed[i] = clean;
      } else {
        ++copies;
      }
    }
    if (copies > dram.pool().free_count()) {
      for (auto b : placed)
        if (b != invalid_block)
          dram.free(b);
    } else {
      for (size_t i = 0; i < blocks.size(); ++i) {
        if (placed[i] != invalid_block)
          continue;
        auto dst = tiers_.allocate(tier::dram);
        KVTIER_CHECK(dst, "preempt: free_count promised a DRAM slot");
        dram.pool().set_state(*dst, block_state::moving);
        // A hashed block's DRAM copy also serves the prefix cache once it lands.
        const auto& h = hbm.pool().hash(blocks[i]);
        if (!h.empty() && dram.find(h) == invalid_block)
          dram.index_as(*dst, h);
        placed[i] = *dst;
        queue_move({move_kind::swap_out, tier::hbm, blocks[i], tier::dram, *dst, hbm.pool().hash(blocks[i]), seq,
                    invalid_block});
        ++s.loading;
      }
      s.dram_blocks = std::move(placed);
      s.swapped = true;
      s.swapped_tokens = s.all_tokens();
      metrics_->swapped_out_blocks += blocks.size();
      if (s.loading == 0) {
        for (auto b = blocks.rbegin(); b != blocks.rend(); ++b)
          hbm.free(*b);
        s.table = block_table(options_.block_tokens);
      }
      table_changed(s, 0); // swapped in, its table is all new slots
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
  if (s.dram_blocks.size() > hbm.pool().free_count()) {
    ++metrics_->tiers[index_of(tier::hbm)].allocation_failures;
    return admit_status::no_room;
  }
  auto& dram = store(tier::dram);
  std::vector<block_id> blocks;
  blocks.reserve(s.dram_blocks.size());
  std::vector<std::pair<block_id, block_id>> to_copy;
  for (auto src : s.dram_blocks) {
    const auto& h = dram.pool().hash(src);
    auto resident = h.empty() ? invalid_block : hbm.find(h);
    if (resident != invalid_block) {
      hbm.pin(resident);
      blocks.push_back(resident);
      dram.free(src);
      if (hbm.pool().state(resident) == block_state::moving)
        to_copy.emplace_back(invalid_block, resident); // wait on someone else's move
      continue;
    }
    auto dst = tiers_.allocate(tier::hbm);
    KVTIER_CHECK(dst, "swap_in: free_count promised a slot");
    hbm.pool().set_state(*dst, block_state::moving);
    if (!h.empty())
      hbm.index_as(*dst, h);
    blocks.push_back(*dst);
    to_copy.emplace_back(src, *dst);
  }
  s.table = block_table(options_.block_tokens);
  s.table.adopt_prefix(std::move(blocks), s.swapped_tokens - s.streamed_tokens());
  table_changed(s, 0);
  s.swapped = false;
  s.dram_blocks.clear();
  metrics_->swapped_in_blocks += s.table.blocks().size();
  for (auto [src, dst] : to_copy) {
    if (src != invalid_block) {
      hbm.pin(dst); // the move's reference, until it lands
      queue_move({move_kind::swap_in, tier::dram, src, tier::hbm, dst, dram.pool().hash(src), seq, invalid_block});
    }
    wait_for(seq, dst);
  }
  return s.loading > 0 ? admit_status::loading : admit_status::ready;
}

compaction_result block_manager_state::compact(uint64_t seq, std::span<const uint32_t> indices,
                                               std::span<const uint32_t> expected_slots) {
  auto& s = sequences_.at(seq);
  KVTIER_CHECK(!s.swapped && s.loading == 0, "block_manager_state::compact: sequence is not resident");
  compaction_result result;
  result.dropped_tokens = s.dropped_tokens;
  const auto& blocks = s.table.blocks();
  bool fits = std::is_sorted(indices.begin(), indices.end()) &&
      std::adjacent_find(indices.begin(), indices.end()) == indices.end() &&
      (indices.empty() || indices.back() + size_t{1} < blocks.size()) &&
      (expected_slots.empty() || expected_slots.size() == indices.size());
  for (size_t i = 0; fits && i < expected_slots.size(); ++i)
    fits = index_of(blocks[indices[i]]) == expected_slots[i];
  // A sequence streaming its leading blocks from DRAM is not compacted: the
  // indices name entries of the whole table (streamed ones included), and
  // compaction frees HBM, which a streamed prefix does not hold.
  if (!s.streamed.empty() || !s.spilling.empty())
    fits = false;
  if (!fits)
    return result;
  result.applied = true;
  if (indices.empty())
    return result;
  auto& hbm = store(tier::hbm);
  // The blocks before the first removed one are still the prompt's exact
  // prefix; past it a table entry no longer is its chain's block, so nothing
  // further may be indexed for sharing.
  s.chain.resize(std::min<size_t>(s.chain.size(), indices.front()));
  table_changed(s, s.streamed.size() + indices.front()); // later entries shift down
  for (auto id : s.table.remove(indices)) {
    result.dropped.push_back(index_of(id));
    hbm.free(id);
    if (hbm.pool().ref_count(id) == 0)
      result.freed.push_back(index_of(id));
  }
  s.dropped_tokens += uint64_t{options_.block_tokens} * indices.size();
  result.dropped_tokens = s.dropped_tokens;
  return result;
}

uint64_t block_manager_state::fragmentation_tokens() const {
  uint64_t unused = 0;
  for (const auto& [id, s] : sequences_)
    if (!s.swapped && !s.table.blocks().empty())
      unused += options_.block_tokens - s.table.tail_tokens();
  return unused;
}

} // namespace kvtier
