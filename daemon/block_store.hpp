#pragma once
// The daemon's blocks: a DRAM tier and, when configured, an NVMe tier over
// io/'s slot_store, each a runtime/ block_pool (kvtier's LRU with clean and
// dirty lists) with a prefix_index. Blocks are named by salted hashes
// (salted_key): the tenant's salt is the seed, so tenants that do not share
// a salt never find each other's blocks.
//
// The tier of record holds every acknowledged block: NVMe when configured
// (DRAM is then a cache of it, and its slots are released "backed", so they
// are evicted before anything else), else DRAM. Quotas and pins apply to the
// tier of record.
//
// Invariants:
//  (1) set() reports a block stored only once the tier of record holds its
//      bytes: for NVMe, once its page write completed (so a SIGKILL after the
//      acknowledgement loses nothing: the slot file is recovered at open).
//  (2) An index maps a hash to a slot only while that slot holds the hash;
//      an evicted slot is unindexed only if the index still points at it.
//  (3) Each slot of the tier of record is owned by the tenant that wrote it
//      (or, after a restart, the tenant of its salt); tenant_blocks(t) counts
//      the slots t owns, in flight included, so a quota counts writes not yet
//      finished.
//  (4) A pinned block's slot in the tier of record holds a reference, so it
//      is never evicted until unpinned.
//  (5) get() writes a destination only for keys it reports found.
//  (6) A batch wider than the free DRAM slots moves in waves; one that finds
//      every slot held by other batches' moves waits for the next to land. A
//      block is reported failed for want of a slot only when no move is in
//      flight (every slot pinned).
//  (7) A batch whose copies exceed inline_copy_bytes copies on the copy pool;
//      the DRAM slots it copies from or into hold a reference meanwhile (never
//      evicted or reused under the copy), a slot being filled is indexed only
//      once its copy finished, and done() runs after the last copy. Copies
//      count as moves in flight (jobs_in_flight), so a stop waits for them.
// Threading: owned by one thread (the daemon's io_context); completions of
// NVMe jobs and of pool copies come back through `post` to that thread.

#include "daemon/copy_pool.hpp"
#include "io/slot_store.hpp"
#include "runtime/block_hash.hpp"
#include "runtime/block_pool.hpp"
#include "runtime/nvme_settings.hpp"
#include "runtime/prefix_index.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kvtier::daemon {

struct store_options {
  std::uint64_t block_bytes = 0;
  std::uint32_t dram_slots = 0;
  bool dram_prefault = true;
  std::string nvme_path; // empty: no NVMe tier
  std::uint32_t nvme_slots = 0;
  nvme_settings nvme;
  /// Threads that copy blocks off the owner thread; 0 copies on it.
  unsigned copy_threads = 2;
};

struct store_counters {
  std::uint64_t hits_dram = 0;
  std::uint64_t hits_nvme = 0;
  std::uint64_t misses = 0;
  std::uint64_t evictions_dram = 0;
  std::uint64_t evictions_nvme = 0;
  std::uint64_t stored = 0;     // blocks newly stored
  std::uint64_t duplicates = 0; // set of a block already held
  std::uint64_t write_failures = 0;
  std::uint64_t read_failures = 0;
  std::uint64_t bytes_to_clients = 0;
  std::uint64_t bytes_from_clients = 0;
  std::uint64_t recovered = 0; // NVMe blocks adopted at open
  double copy_seconds = 0;     // block copies on the owner thread (the pool counts its own)
  std::uint64_t copies = 0;    // blocks copied on the owner thread
};

/// The salted block hash of a client key: XXH3-128 of the key, seeded by the salt.
block_hash salted_key(std::uint64_t lo, std::uint64_t hi, std::uint64_t salt);

class block_store {
public:
  using post_fn = std::function<void(std::function<void()>)>;
  /// The tenant owning blocks written with `salt` (for recovered blocks);
  /// tenants count from 0.
  using tenant_of_salt_fn = std::function<std::uint32_t(std::uint64_t salt)>;

  static caf::expected<std::unique_ptr<block_store>> open(const store_options& options, std::uint32_t tenants,
                                                          const tenant_of_salt_fn& tenant_of_salt, post_fn post);
  ~block_store();
  block_store(const block_store&) = delete;
  block_store& operator=(const block_store&) = delete;

  std::uint64_t block_bytes() const { return block_bytes_; }
  bool has_nvme() const { return nvme_ != nullptr; }

  /// How many of `hashes`, from the first, the store holds.
  std::size_t leading_hits(std::span<const block_hash> hashes);
  /// Whether the store holds `hash` (in any tier), without counting a hit.
  bool holds(const block_hash& hash) const;

  struct get_item {
    block_hash hash;
    std::byte* destination;
  };
  /// Copies each held block to its destination; `done(found)` runs on the
  /// owner thread, possibly before get() returns.
  void get(std::vector<get_item> items, std::function<void(std::vector<bool>)> done);

  struct set_item {
    block_hash hash;
    const std::byte* source;
  };
  /// Stores each block not yet held, owned by `tenant`; `done(stored)` as for
  /// get(). A block the store cannot place (every slot pinned or in flight)
  /// is reported not stored.
  void set(std::uint32_t tenant, std::uint64_t salt, std::vector<set_item> items,
           std::function<void(std::vector<bool>)> done);
  /// How many of `hashes` set() would add (not yet held).
  std::uint64_t new_blocks(std::span<const block_hash> hashes) const;

  /// Pins a held block in the tier of record; false if not held.
  bool pin(const block_hash& hash);
  /// Ends one pin of `hash` (REQUIRES: a pin of it by the caller).
  void unpin(const block_hash& hash);

  std::uint64_t tenant_blocks(std::uint32_t tenant) const { return owned_[tenant]; }
  std::uint32_t dram_used() const { return dram_index_.size(); }
  std::uint32_t dram_capacity() const { return dram_pool_.capacity(); }
  std::uint32_t nvme_used() const { return nvme_ ? nvme_index_.size() : 0; }
  std::uint32_t nvme_capacity() const { return nvme_ ? nvme_pool_.capacity() : 0; }
  std::uint64_t jobs_in_flight() const { return jobs_in_flight_; }
  const store_counters& counters() const { return counters_; }
  /// Seconds the copy pool's threads spent copying.
  double pool_copy_seconds() const { return copies_ ? copies_->copy_seconds() : 0.0; }
  std::uint64_t pool_copies() const { return copies_ ? copies_->blocks() : 0; }
  /// Copies of at most this many bytes in all run on the owner thread: the
  /// hop to a pool thread and back costs more than they do.
  static constexpr std::size_t inline_copy_bytes = 64 * 1024;
  /// The NVMe link's counters (zero without NVMe).
  link_counters nvme_reads() const;
  link_counters nvme_writes() const;
  std::string open_message() const;

private:
  block_store(const store_options& options, std::uint32_t tenants, post_fn post);
  std::byte* dram(block_id id) const { return dram_base_ + std::uint64_t{index_of(id)} * block_bytes_; }
  /// A DRAM slot for new bytes, its old block unindexed; nullopt when every slot is referenced.
  std::optional<block_id> take_dram_slot();
  std::optional<block_id> take_nvme_slot(std::uint32_t tenant);
  void drop_record(block_id id); // a slot of the tier of record leaves it
  void release_dram(block_id id);
  /// One block's bytes, timed into counters_.copy_seconds.
  void copy_block(std::byte* to, const std::byte* from);
  /// Runs `copies`, then `then` on the owner thread: inline when small or
  /// without a pool, else on the pool (a move in flight meanwhile).
  void copy_then(std::vector<block_copy> copies, std::function<void()> then);
  struct get_batch {
    std::vector<get_item> items;
    std::vector<bool> found;
    std::function<void(std::vector<bool>)> done;
    bool scanning = true;    // get_from has items left to look at
    std::size_t copying = 0; // copy parts not yet finished
  };
  /// Copies blocks out of the held DRAM slots `held`, then releases them.
  void copy_out(const std::shared_ptr<get_batch>& batch, std::vector<block_copy> copies, std::vector<block_id> held);
  void finish_get(const std::shared_ptr<get_batch>& batch);
  void set_dram_only(std::uint32_t tenant, std::vector<set_item> items, std::function<void(std::vector<bool>)> done);
  struct set_batch {
    std::uint32_t tenant;
    std::uint64_t salt;
    std::vector<set_item> items;
    std::vector<bool> stored;
    std::function<void(std::vector<bool>)> done;
  };
  void get_from(std::shared_ptr<get_batch> batch, std::size_t from);
  void set_from(std::shared_ptr<set_batch> batch, std::size_t from);
  /// Batches that found every slot taken by others' moves retry, in order.
  void resume_waiting();
  void finish_writes(set_batch& batch, const std::vector<std::size_t>& positions,
                     const std::vector<std::pair<block_id, block_id>>& slots, const io::job_result& r);

  std::uint64_t block_bytes_ = 0;
  std::byte* dram_base_ = nullptr;
  std::size_t dram_bytes_ = 0;
  block_pool dram_pool_;
  prefix_index dram_index_;
  std::vector<std::uint32_t> dram_owner_; // without NVMe: the tenant owning each DRAM slot
  block_pool nvme_pool_;
  prefix_index nvme_index_;
  std::vector<std::uint32_t> nvme_owner_;
  std::vector<std::uint64_t> owned_; // per tenant
  std::unique_ptr<io::slot_store> nvme_;
  post_fn post_;
  std::uint64_t jobs_in_flight_ = 0;
  std::vector<std::function<void()>> waiting_;
  std::uint64_t next_tag_ = 1;
  store_counters counters_;
  std::unique_ptr<copy_pool> copies_; // joined first in the destructor: no copy outlives the tiers
};

} // namespace kvtier::daemon
