#pragma once
// The block manager's logic, as a plain object that tests drive directly.
// The block_manager actor is a thin behavior over it.
//
// Three layers, one concept per file:
//  - tier_stack / tier_cache (actors/tier_stack.hpp, actors/tier_cache.hpp):
//    per tier a pool, its prefix index, backed bits and counted
//    allocate/free; the stack answers whether a lower tier holds a block;
//  - move_tracker (actors/move_tracker.hpp): moves staged, in flight and
//    finished, and the cap on demotions in flight;
//  - this class: the sequence operations (admit, grow, release, preempt,
//    swap-in, compact, adopting recovered NVMe blocks) over every
//    sequence's block table, demote-ahead, and what a finished move does
//    to slots and sequences.
//
// Streaming (docs/model.md): a sequence's logical blocks are a streamed
// prefix, DRAM blocks its steps read in place (named in the plan with
// streamed_slot_bit), then its HBM table. Only a sequence HBM cannot hold
// whole (its prompt is larger, or it outgrew HBM) streams, and only its cold blocks: full, older than the recent
// window, never written again. A grow that finds no HBM room spills the
// oldest cold blocks to DRAM (a copy down; the sequence waits for it like
// for a promotion) instead of failing; an admission whose DRAM prefix hits
// cannot all come up leaves the leading ones in DRAM. Sequences that fit HBM
// do not stream while another sequence holds HBM: they are preempted when
// short of room, as before. One alone in HBM streams (what it lacks is held
// by copies in flight; preempting it would free nothing it could use).
// Files: block_manager_state.cpp (sequences), block_manager_stream.cpp
// (spilling cold blocks for streaming), block_manager_moves.cpp
// (demote-ahead and move completion), block_manager_check.cpp (invariant 3).
//
// Slot states (runtime/block_pool.hpp). A slot leaves the free queue by
// allocation, into `writing` when a sequence will fill it or `moving` when it
// is the destination of a copy. A written block becomes `full` (hashed,
// shareable) once complete; a copy's destination becomes `full` when the
// copy lands, or, when it failed, is uncached and freed (or goes back to
// `writing` for the sequences that hold it). A full block that is pinned as
// the source of a copy keeps its state and stays readable. A slot whose last
// reference goes returns to the free queue, keeping its hash (cached).
//
// Invariants:
//  (1) A slot in state `moving` is referenced, so never evicted; no copy
//      reads it (a staged copy whose source is `moving` is counted in
//      reads_while_moving, which stays 0 unless this class is wrong); and no
//      sequence that refers to it is reported ready until the copy landed.
//  (2) Inclusive (the option's default): a block may have copies in several
//      tiers. Exclusive: outside moves in flight, a block has a second copy
//      only while it sits in its tier's clean window (demote-ahead copied it
//      down ahead of its eviction); a landed promotion leaves no copy below
//      unless a sequence or move still holds it. Either way, an eviction that
//      drops the last copy is counted in evictions_lost.
//  (3) Every allocation is matched by exactly one free; at rest,
//      allocated == freed + resident for every tier, and every reference is
//      held by a sequence or by a move (check_conservation()). A move holds
//      its source (a swap-out's are its sequence's) and, below HBM, its
//      destination (a swap-out's is its sequence's); a move into HBM (and the
//      first hop of an NVMe promotion, for its HBM slot) holds the HBM slot
//      too, so a sequence cut back by a failed load cannot free a slot that
//      a copy is still writing.
//  (4) Operations that cannot get room change nothing and say so.
// Transfers are not performed here: take_transfers() hands them out and
// on_transfer_done() applies their result.

#include "actors/move_tracker.hpp"
#include "actors/tier_stack.hpp"
#include "runtime/backend.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/block_table.hpp"
#include "runtime/config.hpp"
#include "runtime/recovered_block.hpp"
#include "runtime/metrics.hpp"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvtier {

struct block_manager_options {
  uint32_t hbm_blocks = 0;
  uint32_t dram_blocks = 0;
  uint32_t nvme_blocks = 0;
  uint32_t block_tokens = 16;
  // Share of each tier's free queue, at its LRU end, that demote-ahead works
  // on. Inclusive: walked at every call, so every block is copied down in
  // time. Exclusive: kept clean (backed below or empty) ahead of need, and a
  // block is copied down only that close to eviction; it must cover what the
  // tier allocates while its link catches up (docs/cache_policy.md).
  double demote_watermark = 0.05;
  bool prefix_caching = true;
  // One copy per block: a landed promotion frees the copy it read, an HBM hit
  // on a block demote-ahead copied down frees that copy, and an eviction from
  // the clean end is the block's move down.
  bool exclusive = false;
  // Which cached block each tier evicts, and which it stores at all: a
  // cache/ policy (actors/tier_policy.hpp); LRU is the free queues' own order.
  eviction_policy policy = eviction_policy::lru;
  // Where the tiers below HBM put a batch's blocks (runtime/slot_placement.hpp):
  // contiguous makes a demotion batch few long DMAs; eviction_order puts each
  // block where the block it evicted lived. Which block is evicted is the same.
  slot_placement_kind placement = slot_placement_kind::contiguous;
  // A sequence larger than HBM keeps its cold blocks in DRAM and streams
  // them into each step; the newest `stream_recent_blocks` full blocks stay
  // in HBM with the blocks being written.
  bool stream_from_dram = true;
  uint32_t stream_recent_blocks = 64;
};

/// The options a config asks for (capacities in blocks, block size, watermark).
block_manager_options block_manager_options_from(const config& cfg);

enum class admit_status : uint8_t {
  ready,   // every hit block is resident in HBM
  loading, // some hit blocks are on their way up; wait for a ready notice
  no_room, // HBM cannot take the promotions now; nothing changed
};

struct compaction_result {
  bool applied = false;          // false: the table is not the one the indices were chosen on
  std::vector<uint32_t> dropped; // HBM slots removed from the table, in table order
  std::vector<uint32_t> freed;   // ... of which no other sequence held: back to the free queue
  uint64_t dropped_tokens = 0;   // the sequence's total after this compaction
};

struct admit_result {
  admit_status status = admit_status::ready;
  uint32_t hit_blocks = 0; // leading prompt blocks found in some tier
  uint64_t hit_tokens = 0; // tokens they cover (capped at the prompt)
  std::array<uint32_t, tier_count> hits_by_tier{};
};

enum class preempt_mode : uint8_t { swap, recompute };

class block_manager_state {
public:
  explicit block_manager_state(const block_manager_options& options, block_metrics* metrics);

  // -- sequences ----------------------------------------------------------------

  /// Registers sequence `seq` with the hashes of its prompt blocks (the last
  /// may cover a partial block) and takes references on its cached prefix.
  /// REQUIRES: seq is not registered.
  admit_result admit(uint64_t seq, std::vector<block_hash> chain, uint64_t prompt_tokens);

  /// Appends `tokens` to the sequence's HBM table, allocating blocks.
  /// Blocks that become full (or end the prompt) get their chain hash and are
  /// indexed for sharing. Returns false and changes nothing if HBM has no room.
  bool grow(uint64_t seq, uint32_t tokens);

  /// grow(), and when HBM has no room for a sequence larger than HBM (or one
  /// alone in HBM), its oldest cold blocks go to DRAM to make it (streaming): `ready` when the
  /// blocks were appended (DRAM copies that already existed serve at once),
  /// `loading` when copies are on their way down (a ready notice follows;
  /// then grow again), `no_room` when nothing changed.
  admit_status extend(uint64_t seq, uint32_t tokens);

  /// Blocks grow(seq, tokens) would allocate.
  uint32_t blocks_needed(uint64_t seq, uint32_t tokens) const;

  /// True when no block of the sequence is in flight.
  bool ready(uint64_t seq) const;

  /// Finishes a sequence: its blocks return to the free queues (hashed ones
  /// stay cached). REQUIRES: ready(seq).
  void release(uint64_t seq);

  /// Preempts a running sequence. swap: its blocks are copied to DRAM and
  /// its HBM blocks freed once there; the sequence is then `swapped`.
  /// recompute: its blocks are released (hashed ones stay cached) and the
  /// sequence is unregistered. Returns the mode used: swap falls back to
  /// recompute when DRAM lacks room.
  preempt_mode preempt(uint64_t seq, preempt_mode wanted);

  /// Brings a swapped sequence back into HBM. no_room changes nothing; it is
  /// also the answer while the swap-out is still in flight (its end is
  /// reported by on_transfer_done like a sequence becoming ready).
  admit_status swap_in(uint64_t seq);

  /// Compression: removes the table blocks at `indices` (ascending, each a
  /// full block before the last) of a resident sequence and drops their
  /// references at once; a block another sequence shares stays. When
  /// `expected_slots` is not empty it names the HBM slot of each index as the
  /// policy saw it: a table that changed since (a recompute re-admitted the
  /// sequence, another compaction) changes nothing and says so (applied false).
  /// New tokens keep their positions: tokens() counts positions, the table
  /// holds tokens() - dropped_tokens() of them.
  compaction_result compact(uint64_t seq, std::span<const uint32_t> indices,
                            std::span<const uint32_t> expected_slots = {});
  /// Positions whose blocks compaction removed from the sequence's table.
  uint64_t dropped_tokens(uint64_t seq) const { return sequences_.at(seq).dropped_tokens; }

  bool registered(uint64_t seq) const { return sequences_.count(seq) > 0; }
  bool swapped(uint64_t seq) const;
  /// Positions the sequence covers: its table's tokens plus dropped_tokens().
  uint64_t tokens(uint64_t seq) const;
  uint32_t hbm_block_count(uint64_t seq) const;
  /// The sequence's slots, one per logical block: its streamed blocks' DRAM
  /// slots with streamed_slot_bit set, then its HBM slots. REQUIRES: resident.
  std::vector<uint32_t> hbm_slots(uint64_t seq) const;
  /// What a plan's result carries of a resident sequence's table: the
  /// entries of hbm_slots() from `from` on. The entries before `from` are
  /// those earlier calls returned for the sequence, unchanged since: appends
  /// change no entry, a copy-on-write tail changes the last one, and a
  /// compaction, a spill to the streamed prefix, a failed load's truncation or
  /// a swap change entries from the first one they touch. The first call
  /// after admission returns the whole table. A decode's update is empty, or
  /// the block it appended: its cost does not grow with the table.
  struct table_update {
    uint32_t from = 0;
    std::vector<uint32_t> entries;
  };
  table_update take_table_update(uint64_t seq);
  /// Leading logical blocks of the sequence that its steps read from DRAM.
  uint32_t streamed_blocks(uint64_t seq) const;
  /// Copy-on-write copies grow() made since the last call: each must be
  /// applied (by the compute port, before its step writes) for the new slot
  /// to hold the shared tail's tokens.
  std::vector<slot_copy> take_copies();

  /// Takes over blocks the NVMe tier recovered after a restart: each slot
  /// becomes a cached free block (indexed, evicted in the order given, first
  /// first), which admit() finds by prefix lookup and promotes like any NVMe
  /// hit. Entries naming a slot out of range or in use, or a hash already
  /// cached in NVMe, are skipped. Returns the blocks adopted (0 without NVMe).
  size_t adopt_nvme_blocks(std::span<const recovered_block> blocks);

  // -- transfers -------------------------------------------------------------------

  /// Starts demotions, oldest dirty block first, over the `watermark` share
  /// of each tier's free queue; exclusive: only until its clean slots (with
  /// the demotions out of it in flight) reach that share, so blocks move down
  /// when they are about to be evicted.
  void demote_ahead();

  /// Moves generated since the last call, one batch per link, naming slots:
  /// the destinations below HBM are placed now, each batch's together
  /// (tier_cache invariant 4), and the batch's runs counted (block_metrics::runs).
  std::vector<transfer_batch> take_transfers();

  /// Applies a finished batch. `ok` false: the destination is invalid (a
  /// corrupted or failed read) and is freed; sequences waiting on it fall back
  /// to recompute of those blocks. Returns sequences that became ready.
  std::vector<uint64_t> on_transfer_done(uint64_t tag, bool ok);

  bool transfers_in_flight() const { return moves_.in_flight(); }
  size_t transfers_in_flight_count() const { return moves_.in_flight_count(); }

  // -- observation ----------------------------------------------------------------

  const block_pool& pool(tier t) const { return tiers_.at(t).pool(); }
  uint32_t free_blocks(tier t) const;
  /// Hash chain resident per tier, for tests: where `hash` lives, or invalid_block.
  block_id find(tier t, const block_hash& hash) const;
  /// The slot holding block `id` of tier `t`, and the block in slot `slot`
  /// (invalid_block if none): a batch names slots, the pools name blocks.
  uint32_t slot_of(tier t, block_id id) const { return store(t).slot_of(id); }
  block_id block_in(tier t, uint32_t slot) const { return store(t).placement().block_in(slot); }
  /// Checks invariant (3); returns a description of the first violation or "".
  std::string check_conservation() const;
  uint64_t fragmentation_tokens() const;
  uint32_t block_tokens() const { return options_.block_tokens; }

private:
  struct sequence {
    block_table table;
    std::vector<block_hash> chain;
    uint64_t prompt_tokens = 0;
    uint32_t loading = 0; // blocks this sequence waits for
    bool swapped = false;
    std::vector<block_id> dram_blocks; // while swapped: its table's blocks in DRAM, in order
    uint64_t swapped_tokens = 0;
    uint64_t dropped_tokens = 0; // positions compaction removed from the table (whole blocks)
    // Streamed prefix: DRAM blocks of the first logical blocks, each
    // referenced by the sequence; the table holds the blocks after them.
    std::vector<block_id> streamed;
    // While spill copies fly: the DRAM blocks the table's first
    // spilling.size() blocks are going to (referenced by the sequence).
    std::vector<block_id> spilling;
    bool spill_failed = false;
    // Leading logical entries (streamed prefix, then table) that the last
    // take_table_update() returned and that have not changed since.
    uint32_t reported = 0;
    uint64_t streamed_tokens() const { return uint64_t{table.block_tokens()} * streamed.size(); }
    uint64_t all_tokens() const { return streamed_tokens() + table.tokens(); }
    sequence(uint32_t block_tokens) : table(block_tokens) {}
  };

  /// The sequence's logical entries from `from` on changed (or went): the
  /// next table update carries them from there.
  static void table_changed(sequence& s, size_t from) {
    s.reported = static_cast<uint32_t>(std::min<size_t>(s.reported, from));
  }

  tier_cache& store(tier t) { return tiers_.at(t); }
  const tier_cache& store(tier t) const { return tiers_.at(t); }
  bool enabled(tier t) const { return tiers_.enabled(t); }

  void queue_move(pending_move move);
  void wait_for(uint64_t seq, block_id hbm_slot);
  void index_full_blocks(sequence& s, uint64_t seq, uint64_t from_tokens);
  void demote_tier(tier t);
  void finish_move(const pending_move& m, bool ok, std::vector<uint64_t>& became_ready);
  void wake_waiters(block_id hbm_slot, std::vector<uint64_t>& became_ready);
  /// A copy into HBM slot `slot` finished: settles it, or on failure cuts the
  /// waiting sequences back to the blocks before it; wakes the waiters and
  /// drops the move's reference.
  void land_in_hbm(block_id slot, bool ok, std::vector<uint64_t>& became_ready);
  /// Exclusive: the copy of `hash` in `t` is no longer needed (it moved up);
  /// freed and forgotten unless something still holds it.
  void drop_copy(tier t, block_id id);
  /// Exclusive: an HBM block that demote-ahead copied down is in use again;
  /// the copy below goes, and the HBM slot is its sole copy.
  void drop_copies_below(block_id hbm_slot);
  enum class spill_result : uint8_t { none, done, copying };
  /// Streaming: moves the sequence's oldest cold HBM blocks to DRAM so that
  /// at least `needed` HBM slots free up.
  spill_result spill_cold(uint64_t seq, uint32_t needed);
  /// No other sequence holds HBM blocks.
  bool alone_in_hbm(uint64_t seq) const;
  /// The spilled blocks are in DRAM: the table's first blocks join the
  /// streamed prefix and their HBM slots are freed (kept cached).
  void settle_spill(sequence& s);

  block_manager_options options_;
  block_metrics* metrics_;
  tier_stack tiers_;
  move_tracker moves_;
  std::unordered_map<uint64_t, sequence> sequences_;
  // Per HBM slot: sequences waiting for the move into it.
  std::vector<std::vector<uint64_t>> waiters_;
  // Free-queue version each tier's last demote walk saw: an unchanged queue
  // needs no new walk.
  std::array<uint64_t, tier_count> walked_version_{};
  std::vector<slot_copy> copies_;
};

} // namespace kvtier
