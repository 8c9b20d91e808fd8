#include "daemon/block_store.hpp"

#include "io/nvme_options.hpp"
#include "runtime/check.hpp"
#include "runtime/error.hpp"

#include <sys/mman.h>
#include <xxhash.h>

#include <chrono>
#include <cstring>

namespace kvtier::daemon {

block_hash salted_key(std::uint64_t lo, std::uint64_t hi, std::uint64_t salt) {
  const std::uint64_t key[2] = {lo, hi};
  const XXH128_hash_t h = XXH3_128bits_withSeed(key, sizeof key, salt);
  block_hash out{h.low64, h.high64};
  if (out.empty()) // the empty hash means "none" to the pools
    out.lo = 1;
  return out;
}

block_store::block_store(const store_options& options, std::uint32_t tenants, post_fn post)
    : block_bytes_(options.block_bytes),
      dram_pool_(options.dram_slots),
      dram_index_(options.dram_slots),
      dram_owner_(options.dram_slots, 0),
      nvme_pool_(options.nvme_path.empty() ? 0 : options.nvme_slots),
      nvme_index_(options.nvme_path.empty() ? 0 : options.nvme_slots),
      nvme_owner_(options.nvme_path.empty() ? 0 : options.nvme_slots, 0),
      owned_(tenants, 0),
      post_(std::move(post)) {
}

caf::expected<std::unique_ptr<block_store>> block_store::open(const store_options& options, std::uint32_t tenants,
                                                              const tenant_of_salt_fn& tenant_of_salt, post_fn post) {
  std::unique_ptr<block_store> s(new block_store(options, tenants, std::move(post)));
  if (options.copy_threads > 0)
    s->copies_ = std::make_unique<copy_pool>(options.copy_threads, options.block_bytes);
  s->dram_bytes_ = std::size_t{options.dram_slots} * options.block_bytes;
  void* p = ::mmap(nullptr, s->dram_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return make_error(errc::io_failure,
                      "[dram] bytes: cannot map " + std::to_string(s->dram_bytes_) + " bytes: " + std::strerror(errno));
  ::madvise(p, s->dram_bytes_, MADV_HUGEPAGE);
  s->dram_base_ = static_cast<std::byte*>(p);
  // Fault the tier in now: a first write into fresh pages (zeroing, and
  // compaction for huge pages) cost a 2 MiB set ~100 ms on a busy 2-core VM,
  // in the request path. The daemon owns this memory from the start.
  if (options.dram_prefault)
    for (std::size_t at = 0; at < s->dram_bytes_; at += 4096)
      s->dram_base_[at] = std::byte{0};
  if (options.nvme_path.empty())
    return s;
  io::dram_region region{s->dram_base_,
                         tier_layout{slot_order::block_major, options.dram_slots, 1, options.block_bytes}};
  auto nvme = io::slot_store::open(io::make_nvme_options(options.nvme, options.nvme_path), options.nvme_slots, region);
  if (!nvme)
    return nvme.error();
  s->nvme_ = std::move(*nvme);
  // Adopt what an earlier run left: each block is at once findable and
  // counted against its tenant's quota.
  for (const auto& b : s->nvme_->recovered_blocks()) {
    const block_id id{b.nvme_slot};
    if (s->nvme_index_.find(b.hash) != invalid_block)
      continue;
    s->nvme_pool_.set_hash(id, b.hash);
    s->nvme_pool_.ref(id);
    s->nvme_pool_.release(id);
    s->nvme_index_.insert(b.hash, id);
    const auto t = tenant_of_salt(b.salt_id);
    s->nvme_owner_[b.nvme_slot] = t;
    ++s->owned_[t];
    ++s->counters_.recovered;
  }
  return s;
}

block_store::~block_store() {
  copies_.reset(); // waits for queued copies; their completions are dropped by the owner
  nvme_.reset();   // waits for every job; their completions are dropped by the owner
  if (dram_base_)
    ::munmap(dram_base_, dram_bytes_);
}

std::string block_store::open_message() const {
  std::string m = "dram " + std::to_string(dram_pool_.capacity()) + " blocks of " + std::to_string(block_bytes_) + " B";
  if (nvme_)
    m += "; nvme " + std::to_string(nvme_pool_.capacity()) + " blocks, " + std::to_string(counters_.recovered) +
        " recovered (" + nvme_->report().message() + ")";
  else
    m += "; no nvme tier (blocks live in DRAM only)";
  return m;
}

link_counters block_store::nvme_reads() const {
  return nvme_ ? nvme_->read_counters() : link_counters{};
}
link_counters block_store::nvme_writes() const {
  return nvme_ ? nvme_->write_counters() : link_counters{};
}

bool block_store::holds(const block_hash& hash) const {
  return dram_index_.find(hash) != invalid_block || (nvme_ && nvme_index_.find(hash) != invalid_block);
}

std::size_t block_store::leading_hits(std::span<const block_hash> hashes) {
  // A batch's keys land in unrelated buckets, each a likely cache miss:
  // loading a few ahead overlaps them (a prefetch changes nothing).
  constexpr std::size_t ahead = 8;
  for (std::size_t i = 0; i < std::min(ahead, hashes.size()); ++i)
    dram_index_.prefetch(hashes[i]);
  std::size_t n = 0;
  for (const auto& h : hashes) {
    if (n + ahead < hashes.size())
      dram_index_.prefetch(hashes[n + ahead]);
    if (dram_index_.find(h) != invalid_block)
      ++counters_.hits_dram;
    else if (nvme_ && nvme_index_.find(h) != invalid_block)
      ++counters_.hits_nvme;
    else {
      ++counters_.misses;
      break;
    }
    ++n;
  }
  return n;
}

std::uint64_t block_store::new_blocks(std::span<const block_hash> hashes) const {
  std::uint64_t n = 0;
  for (const auto& h : hashes)
    n += (nvme_ ? nvme_index_.find(h) == invalid_block : dram_index_.find(h) == invalid_block) ? 1 : 0;
  return n;
}

void block_store::drop_record(block_id id) {
  auto& owner = nvme_ ? nvme_owner_ : dram_owner_;
  --owned_[owner[index_of(id)]];
}

std::optional<block_id> block_store::take_dram_slot() {
  auto a = dram_pool_.allocate();
  if (!a)
    return std::nullopt;
  if (!a->evicted.empty()) {
    if (dram_index_.find(a->evicted) == a->id) {
      dram_index_.erase(a->evicted);
      ++counters_.evictions_dram;
      if (!nvme_)
        drop_record(a->id);
    }
  }
  dram_pool_.set_hash(a->id, {});
  return a->id;
}

std::optional<block_id> block_store::take_nvme_slot(std::uint32_t tenant) {
  auto a = nvme_pool_.allocate();
  if (!a)
    return std::nullopt;
  if (!a->evicted.empty() && nvme_index_.find(a->evicted) == a->id) {
    nvme_index_.erase(a->evicted);
    ++counters_.evictions_nvme;
    drop_record(a->id);
    // A DRAM copy of the evicted block is now its only copy: drop it too,
    // so the tier of record stays the whole truth (unless a copy reads it).
    if (auto d = dram_index_.find(a->evicted); d != invalid_block && dram_pool_.ref_count(d) == 0) {
      dram_index_.erase(a->evicted);
      dram_pool_.forget(d);
    }
  }
  nvme_pool_.set_hash(a->id, {});
  nvme_owner_[index_of(a->id)] = tenant;
  ++owned_[tenant];
  return a->id;
}

void block_store::copy_block(std::byte* to, const std::byte* from) {
  const auto t0 = std::chrono::steady_clock::now();
  std::memcpy(to, from, block_bytes_);
  ++counters_.copies;
  counters_.copy_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void block_store::release_dram(block_id id) {
  if (nvme_)
    dram_pool_.release_backed(id);
  else
    dram_pool_.release(id);
}

void block_store::copy_then(std::vector<block_copy> copies, std::function<void()> then) {
  if (!copies_ || copies.size() * block_bytes_ <= inline_copy_bytes) {
    for (const auto& c : copies)
      copy_block(c.to, c.from);
    then();
    return;
  }
  ++jobs_in_flight_;
  copies_->run(std::move(copies), [this, then = std::move(then)]() mutable {
    post_([this, then = std::move(then)] {
      --jobs_in_flight_;
      then();
      resume_waiting();
    });
  });
}

void block_store::get(std::vector<get_item> items, std::function<void(std::vector<bool>)> done) {
  std::vector<bool> found(items.size(), false);
  get_from(std::make_shared<get_batch>(get_batch{std::move(items), std::move(found), std::move(done)}), 0);
}

void block_store::copy_out(const std::shared_ptr<get_batch>& batch, std::vector<block_copy> copies,
                           std::vector<block_id> held) {
  if (copies.empty())
    return;
  ++batch->copying;
  copy_then(std::move(copies), [this, batch, held = std::move(held)] {
    for (const auto d : held)
      release_dram(d);
    --batch->copying;
    finish_get(batch);
  });
}

void block_store::finish_get(const std::shared_ptr<get_batch>& batch) {
  if (!batch->scanning && batch->copying == 0)
    batch->done(std::move(batch->found));
}

// Serves items[from...]: DRAM hits are copied out of their slots, NVMe
// blocks are read through DRAM slots and copied out when the read lands. A
// batch wider than the free DRAM slots goes in waves: the rest continues
// when a wave's reads complete.
void block_store::get_from(std::shared_ptr<get_batch> batch, std::size_t from) {
  page_job job;
  job.op = page_op::read;
  std::vector<std::size_t> positions;
  std::vector<std::pair<block_id, block_id>> slots; // (dram, nvme) per read
  std::vector<block_copy> copies;
  std::vector<block_id> held;
  std::size_t i = from;
  for (; i < batch->items.size(); ++i) {
    const auto& it = batch->items[i];
    if (auto d = dram_index_.find(it.hash); d != invalid_block) {
      dram_pool_.ref(d); // released once copied
      copies.push_back({it.destination, dram(d)});
      held.push_back(d);
      batch->found[i] = true;
      ++counters_.hits_dram;
      counters_.bytes_to_clients += block_bytes_;
      continue;
    }
    const block_id n = nvme_ ? nvme_index_.find(it.hash) : invalid_block;
    if (n == invalid_block) {
      ++counters_.misses;
      continue;
    }
    auto d = take_dram_slot();
    if (!d) {
      if (!job.pages.empty())
        break;                   // the next wave
      if (jobs_in_flight_ > 0) { // other batches hold every slot: resume when one lands
        copy_out(batch, std::move(copies), std::move(held));
        waiting_.push_back([this, batch, i] { get_from(batch, i); });
        return;
      }
      ++counters_.read_failures;
      continue;
    }
    nvme_pool_.ref(n); // the read's reference: not evicted under it
    const auto stored = nvme_->lookup(index_of(n));
    job.pages.push_back(page_transfer{index_of(*d), index_of(n), it.hash, stored ? stored->salt_id : 0});
    positions.push_back(i);
    slots.emplace_back(*d, n);
  }
  copy_out(batch, std::move(copies), std::move(held));
  if (job.pages.empty()) {
    batch->scanning = false;
    finish_get(batch);
    return;
  }
  job.tag = next_tag_++;
  ++jobs_in_flight_;
  nvme_->submit(
      std::move(job),
      [this, batch, positions = std::move(positions), slots = std::move(slots), next = i](io::job_result r) mutable {
        post_([this, batch, positions = std::move(positions), slots = std::move(slots), next,
               r = std::move(r)]() mutable {
          --jobs_in_flight_;
          std::vector<block_copy> read_copies;
          std::vector<block_id> read_held;
          for (std::size_t k = 0; k < positions.size(); ++k) {
            const auto [d, n] = slots[k];
            const auto& it = batch->items[positions[k]];
            const bool ok = k < r.pages.size() && !r.pages[k];
            nvme_pool_.release(n);
            if (ok) {
              dram_pool_.set_hash(d, it.hash);
              dram_index_.insert(it.hash, d);
              read_copies.push_back({it.destination, dram(d)});
              read_held.push_back(d); // released (backed) once copied out
              batch->found[positions[k]] = true;
              ++counters_.hits_nvme;
              counters_.bytes_to_clients += block_bytes_;
            } else {
              dram_pool_.release(d); // unhashed: reused first
              ++counters_.read_failures;
            }
          }
          copy_out(batch, std::move(read_copies), std::move(read_held));
          get_from(batch, next);
          resume_waiting();
        });
      });
}

void block_store::set(std::uint32_t tenant, std::uint64_t salt, std::vector<set_item> items,
                      std::function<void(std::vector<bool>)> done) {
  if (!nvme_)
    return set_dram_only(tenant, std::move(items), std::move(done));
  std::vector<bool> stored(items.size(), false);
  set_from(std::make_shared<set_batch>(set_batch{tenant, salt, std::move(items), std::move(stored), std::move(done)}),
           0);
}

// DRAM is the store: each new block is copied into a slot taken for it, and
// indexed once the copy finished (a block set twice at once keeps the first).
void block_store::set_dram_only(std::uint32_t tenant, std::vector<set_item> items,
                                std::function<void(std::vector<bool>)> done) {
  std::vector<bool> stored(items.size(), false);
  std::vector<block_copy> copies;
  std::vector<std::pair<std::size_t, block_id>> filling; // (item, slot)
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (dram_index_.find(items[i].hash) != invalid_block) {
      stored[i] = true;
      ++counters_.duplicates;
      continue;
    }
    auto d = take_dram_slot();
    if (!d) {
      ++counters_.write_failures;
      continue;
    }
    dram_owner_[index_of(*d)] = tenant;
    ++owned_[tenant]; // a write in flight counts against the quota
    copies.push_back({dram(*d), items[i].source});
    filling.emplace_back(i, *d);
  }
  copy_then(std::move(copies),
            [this, items = std::move(items), filling = std::move(filling), stored = std::move(stored),
             done = std::move(done)]() mutable {
              for (const auto& [i, d] : filling) {
                const auto& h = items[i].hash;
                stored[i] = true;
                if (dram_index_.find(h) != invalid_block) { // the same block, set twice at once
                  drop_record(d);
                  dram_pool_.release(d);
                  dram_pool_.forget(d);
                  ++counters_.duplicates;
                  continue;
                }
                dram_pool_.set_hash(d, h);
                dram_index_.insert(h, d);
                dram_pool_.release(d);
                ++counters_.stored;
                counters_.bytes_from_clients += block_bytes_;
              }
              done(std::move(stored));
            });
}

// Copies items[from...] into DRAM slots and writes them to NVMe, in waves as
// get_from.
void block_store::set_from(std::shared_ptr<set_batch> batch, std::size_t from) {
  page_job job;
  job.op = page_op::write;
  std::vector<std::size_t> positions;
  std::vector<std::pair<block_id, block_id>> slots;
  std::vector<block_copy> copies;
  std::size_t i = from;
  for (; i < batch->items.size(); ++i) {
    const auto& it = batch->items[i];
    if (nvme_index_.find(it.hash) != invalid_block) {
      batch->stored[i] = true;
      ++counters_.duplicates;
      continue;
    }
    auto d = take_dram_slot();
    auto n = d ? take_nvme_slot(batch->tenant) : std::nullopt;
    if (!n) {
      if (d)
        dram_pool_.release(*d);
      if (!job.pages.empty())
        break;                   // the next wave
      if (jobs_in_flight_ > 0) { // other batches hold every slot: resume when one lands
        waiting_.push_back([this, batch, i] { set_from(batch, i); });
        return;
      }
      ++counters_.write_failures;
      continue;
    }
    copies.push_back({dram(*d), it.source});
    nvme_pool_.set_hash(*n, it.hash);
    job.pages.push_back(page_transfer{index_of(*d), index_of(*n), it.hash, batch->salt});
    positions.push_back(i);
    slots.emplace_back(*d, *n);
  }
  if (job.pages.empty()) {
    batch->done(std::move(batch->stored));
    return;
  }
  job.tag = next_tag_++;
  // The wave's blocks are copied into their DRAM slots, then written.
  copy_then(std::move(copies),
            [this, batch, job = std::move(job), positions = std::move(positions), slots = std::move(slots),
             next = i]() mutable {
              ++jobs_in_flight_;
              nvme_->submit(std::move(job),
                            [this, batch, positions = std::move(positions), slots = std::move(slots),
                             next](io::job_result r) mutable {
                              post_([this, batch, positions = std::move(positions), slots = std::move(slots), next,
                                     r = std::move(r)]() mutable {
                                --jobs_in_flight_;
                                finish_writes(*batch, positions, slots, r);
                                set_from(batch, next);
                                resume_waiting();
                              });
                            });
            });
}

void block_store::finish_writes(set_batch& batch, const std::vector<std::size_t>& positions,
                                const std::vector<std::pair<block_id, block_id>>& slots, const io::job_result& r) {
  for (std::size_t k = 0; k < positions.size(); ++k) {
    const auto [d, n] = slots[k];
    const auto& h = batch.items[positions[k]].hash;
    const bool ok = k < r.pages.size() && !r.pages[k];
    const bool duplicate = ok && nvme_index_.find(h) != invalid_block; // the same block, written twice at once
    if (!ok || duplicate) {
      drop_record(n);
      nvme_pool_.release(n);
      nvme_pool_.forget(n);
      dram_pool_.release(d);
      dram_pool_.forget(d);
      if (ok) {
        batch.stored[positions[k]] = true;
        ++counters_.duplicates;
      } else {
        ++counters_.write_failures;
      }
      continue;
    }
    nvme_index_.insert(h, n);
    nvme_pool_.release(n);
    dram_pool_.set_hash(d, h);
    dram_index_.insert(h, d);
    dram_pool_.release_backed(d);
    batch.stored[positions[k]] = true;
    ++counters_.stored;
    counters_.bytes_from_clients += block_bytes_;
  }
}

void block_store::resume_waiting() {
  auto ready = std::exchange(waiting_, {});
  for (auto& resume : ready)
    resume();
}

bool block_store::pin(const block_hash& hash) {
  auto& index = nvme_ ? nvme_index_ : dram_index_;
  auto& pool = nvme_ ? nvme_pool_ : dram_pool_;
  const auto id = index.find(hash);
  if (id == invalid_block)
    return false;
  pool.ref(id);
  return true;
}

void block_store::unpin(const block_hash& hash) {
  auto& index = nvme_ ? nvme_index_ : dram_index_;
  auto& pool = nvme_ ? nvme_pool_ : dram_pool_;
  const auto id = index.find(hash);
  KVTIER_CHECK(id != invalid_block, "block_store::unpin: the block is not held (was it pinned?)");
  if (nvme_)
    pool.release(id);
  else
    release_dram(id);
}

} // namespace kvtier::daemon
