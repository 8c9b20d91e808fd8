#include "io/slot_store.hpp"

#include "io/aligned_buffer.hpp"
#include "io/engine_selector.hpp"
#include "io/os_error.hpp"
#include "runtime/check.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_set>

namespace kvtier::io {

using clock_type = std::chrono::steady_clock;

struct slot_store::job_state {
  page_job job;
  job_callback done;
  std::vector<caf::error> errors;
  uint32_t left = 0;
  uint64_t bytes = 0;
};

namespace {

std::string hex(const block_hash& h) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.hi),
                static_cast<unsigned long long>(h.lo));
  return buf;
}

/// Deadlines need no precision finer than the timeout; the coarse clock costs
/// no TSC read (same base as steady_clock, a few ms of resolution).
clock_type::time_point coarse_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return clock_type::time_point{std::chrono::seconds{ts.tv_sec} + std::chrono::nanoseconds{ts.tv_nsec}};
}

} // namespace

std::string open_report::message() const {
  std::string out = probe.message() + "; engine: " + engine + "; " + layout;
  if (formatted)
    return out + "; formatted a new slot file (" + format_why + ")";
  out += "; recovered " + std::to_string(recovered) + " blocks";
  if (!superblock_rebuilt.empty())
    out += "; " + superblock_rebuilt;
  if (truncated > 0)
    out +=
        "; the file ended " + std::to_string(truncated) + " slots early (those blocks are lost; the file was extended)";
  if (damaged > 0) {
    out += "; " + std::to_string(damaged) + " slots damaged (treated as empty):";
    for (size_t i = 0; i < damage.size(); ++i)
      out += (i == 0 ? " slot " : ", slot ") + std::to_string(damage[i].nvme_slot) + " (" + damage[i].why + ")";
    if (damage.size() < damaged)
      out += ", ...";
  }
  return out;
}

caf::expected<std::unique_ptr<slot_store>> slot_store::open(const nvme_options& options, uint32_t nvme_slots,
                                                            dram_region region) {
  const uint64_t block = region.layout.block_bytes();
  auto invalid = [](std::string what) { return make_error(errc::invalid_argument, "NVMe tier: " + std::move(what)); };
  if (block == 0 || nvme_slots == 0)
    return invalid("a slot file needs a block size and a slot count above zero (got " + std::to_string(block) +
                   " bytes x " + std::to_string(nvme_slots) + " slots)");
  if (block > max_block_bytes)
    return invalid("block of " + std::to_string(block) + " bytes is oversized: at most " +
                   std::to_string(max_block_bytes) + " (1 GiB) per block");
  if (region.layout.order != slot_order::block_major)
    return invalid("the DRAM region must be block-major (one block = one contiguous I/O)");
  if (!region.base || region.layout.slots == 0)
    return invalid("no DRAM region to move pages to or from");
  if (options.queue_depth == 0)
    return invalid("queue_depth must be at least 1");
  bool direct = options.direct_io;
  if (direct && (block % sector_bytes != 0 || reinterpret_cast<uintptr_t>(region.base) % sector_bytes != 0))
    return invalid("misaligned DRAM region for O_DIRECT: block of " + std::to_string(block) + " bytes at address " +
                   std::to_string(reinterpret_cast<uintptr_t>(region.base) % sector_bytes) +
                   " past a 4 KiB boundary; both must be multiples of 4096 (or set direct_io = false)");

  std::unique_ptr<slot_store> s{new slot_store};
  const bool large = block >= options.large_block_bytes;
  s->geometry_ = {block, nvme_slots, large ? slot_layout::split : slot_layout::adjacent, options.payload_encoding};
  s->region_ = region;
  s->write_retries_ = options.write_retries;
  s->read_retries_ = options.read_retries;
  s->timeout_ = std::chrono::milliseconds{options.io_timeout_ms};
  s->report_.probe = probe_engine(options.engine);
  if (auto parent = std::filesystem::path(options.file).parent_path(); !parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec)
      return os_error(ec.value(), "NVMe tier: cannot create directory " + parent.string());
  }
  int fd = open_slot_file(options.file, direct, s->report_.probe);
  if (fd < 0)
    return os_error(-fd, "NVMe tier: cannot open slot file " + options.file);
  s->fd_ = fd;
  auto file = format_or_recover(fd, options.file, s->geometry_, options.on_open);
  if (!file)
    return std::move(file.error());
  s->file_id_ = file->file_id;
  s->recovered_ = adoptable_blocks(file->slots);
  static_cast<slot_file_report&>(s->report_) = std::move(file->report);
  {
    mutex_lock lock{s->mutex_}; // no other thread yet: the lock only tells the analysis so
    s->slots_ = std::move(file->slots);
    s->damaged_ = std::move(file->damaged);
    s->next_sequence_ = file->next_sequence;
  }

  s->header_arena_ = aligned_bytes(uint64_t{options.queue_depth} * sector_bytes);
  if (!s->header_arena_)
    return make_error(errc::no_capacity, "NVMe tier: no memory for the header arena");
  io_buffers buffers;
  buffers.payload_base = region.base;
  buffers.payload_bytes = region.layout.total_bytes();
  buffers.payload_chunk = std::max<uint64_t>(1, max_block_bytes / block) * block;
  buffers.header_base = s->header_arena_.get();
  buffers.header_bytes = uint64_t{options.queue_depth} * sector_bytes;
  s->engine_ = select_engine(options, fd, buffers, s->report_.probe);
  s->report_.engine = s->engine_->describe();
  s->report_.layout = large ? "split slot layout (large blocks: payloads on a 2 MiB grid)"
                            : "adjacent slot layout (header beside payload)";
  s->engine_->set_callback([raw = s.get()](uint64_t id, int64_t result) { raw->on_complete(id, result, true); });
  {
    mutex_lock lock{s->mutex_};
    for (uint32_t lane = options.queue_depth; lane-- > 0;)
      s->free_lanes_.push_back(lane);
  }
  s->watchdog_ = std::thread([raw = s.get()] { raw->watchdog(); });
  return s;
}

slot_store::~slot_store() {
  {
    mutex_lock lock{mutex_};
    while (open_jobs_ != 0)
      lock.wait(drained_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (watchdog_.joinable())
    watchdog_.join();
  engine_.reset();
  if (fd_ >= 0)
    ::close(fd_);
}

std::byte* slot_store::payload_of(const page_transfer& p) const {
  return region_.base + region_.layout.offset(p.dram_slot, 0);
}

std::byte* slot_store::sector_of(uint32_t lane) const {
  return header_arena_.get() + uint64_t{lane} * sector_bytes;
}

caf::error slot_store::reject(const page_job& job) {
  std::unordered_set<uint32_t> seen;
  if (job.pages.size() > 1)
    seen.reserve(job.pages.size());
  for (size_t i = 0; i < job.pages.size(); ++i) {
    const auto& p = job.pages[i];
    auto at = [&] { return "NVMe tier: job " + std::to_string(job.tag) + " page " + std::to_string(i) + ": "; };
    if (p.dram_slot >= region_.layout.slots)
      return make_error(errc::invalid_argument,
                        at() + "DRAM slot " + std::to_string(p.dram_slot) + " is outside the pool's " +
                            std::to_string(region_.layout.slots) + " slots");
    if (p.nvme_slot >= geometry_.slots)
      return make_error(errc::invalid_argument,
                        at() + "NVMe slot " + std::to_string(p.nvme_slot) + " is outside the file's " +
                            std::to_string(geometry_.slots) + " slots");
    if (job.pages.size() > 1 && !seen.insert(p.nvme_slot).second)
      return make_error(errc::invalid_argument,
                        at() + "NVMe slot " + std::to_string(p.nvme_slot) + " appears twice in one job");
    if (job.op == page_op::write && p.hash.empty())
      return make_error(errc::invalid_argument, at() + "a block written to NVMe needs its hash");
  }
  return {};
}

void slot_store::submit(page_job job, job_callback done) {
  if (auto err = reject(job)) {
    {
      mutex_lock lock{mutex_};
      ++metrics_.rejected_jobs;
    }
    job_result r;
    r.tag = job.tag;
    r.pages.assign(job.pages.size(), err);
    r.error = std::move(err);
    done(std::move(r));
    return;
  }
  if (job.pages.empty()) {
    done(job_result{job.tag, 0, {}, {}});
    return;
  }
  auto state = std::make_shared<job_state>();
  state->left = static_cast<uint32_t>(job.pages.size());
  state->errors.resize(job.pages.size());
  state->done = std::move(done);
  state->job = std::move(job);
  const auto& pages = state->job.pages;
  const bool is_write = state->job.op == page_op::write;
  bool finished = false;
  {
    mutex_lock lock{mutex_};
    KVTIER_CHECK(!stopping_, "submit after the store began to close");
    ++open_jobs_;
    for (uint32_t i = 0; i < pages.size(); ++i) {
      op o{state, i};
      if (is_write) {                       // its checksum is taken as it is issued (pump)
        slots_[pages[i].nvme_slot].reset(); // reads are misses from now until the write completes
      } else {
        if (auto miss = manifest_miss(pages[i])) {
          ++metrics_.manifest_misses;
          ++metrics_.read_failures;
          state->errors[i] = std::move(miss);
          finished = --state->left == 0;
          continue;
        }
        o.checksum = slots_[pages[i].nvme_slot]->checksum;
      }
      backlog_.push_back(std::move(o));
    }
  }
  if (finished)
    finish_job(*state);
  else
    pump();
}

caf::error slot_store::manifest_miss(const page_transfer& p) const {
  const auto& e = slots_[p.nvme_slot];
  std::string why;
  if (!e && damaged_[p.nvme_slot])
    why = "its header is damaged (torn or corrupted write)";
  else if (!e)
    why = "the slot holds no block";
  else if (e->hash != p.hash || e->salt_id != p.salt_id)
    why = "it holds block " + hex(e->hash) + " salt " + std::to_string(e->salt_id) + ", not " + hex(p.hash) + " salt " +
        std::to_string(p.salt_id);
  if (why.empty())
    return {};
  return make_error(errc::corrupted,
                    "NVMe tier: read of NVMe slot " + std::to_string(p.nvme_slot) + " is a miss: " + why);
}

void slot_store::finish_job(job_state& j) {
  job_result r;
  r.tag = j.job.tag;
  r.bytes = j.bytes;
  r.pages = std::move(j.errors);
  for (const auto& e : r.pages)
    if (e) {
      r.error = e;
      break;
    }
  j.done(std::move(r));
  bool drained;
  {
    mutex_lock lock{mutex_};
    drained = --open_jobs_ == 0;
  }
  if (drained)
    drained_.notify_all();
}

// A write's payload checksum is taken as its page is issued, outside the lock,
// and the pages taken are handed to the engine as soon as 1 MiB of them is
// hashed: the disk starts after one large page's hash, not after a whole
// job's (hashing a 64-block demotion of 2 MiB blocks up front held the disk
// idle ~10 ms a job: docs/fidelity.md), while small pages still go to the
// engine in batches. The DRAM bytes are the caller's until the job completes,
// so hashing them late is safe.
void slot_store::pump() {
  struct taken_page {
    raw_io io;
    std::optional<page_transfer> write; // set for a write: its header is built outside the lock
    uint64_t sequence = 0;
    bool needs_checksum = false; // a retry keeps the first attempt's checksum (same bytes)
  };
  std::vector<taken_page> taken;
  {
    mutex_lock lock{mutex_};
    const auto deadline = coarse_now() + timeout_;
    while (!free_lanes_.empty() && !backlog_.empty()) {
      op o = std::move(backlog_.front());
      backlog_.pop_front();
      o.lane = free_lanes_.back();
      free_lanes_.pop_back();
      o.deadline = deadline;
      const page_transfer& p = o.job->job.pages[o.index];
      const bool is_write = o.job->job.op == page_op::write;
      taken_page t;
      if (is_write) {
        o.sequence = next_sequence_++;
        slots_[p.nvme_slot].reset(); // being written: reads are misses until it completes
        damaged_[p.nvme_slot] = false;
        t.write = p;
        t.sequence = o.sequence;
        t.needs_checksum = o.attempts == 0;
      }
      direction& d = is_write ? writes_ : reads_;
      if (d.in_flight++ == 0)
        d.busy_since = clock_type::now();
      raw_io& r = t.io;
      r.dir = is_write ? io_dir::write : io_dir::read;
      r.id = next_id_++;
      r.lane = o.lane;
      r.payload_offset = geometry_.payload_offset(p.nvme_slot);
      // A read moves the payload alone; the manifest holds what the header said.
      r.offset = is_write ? geometry_.header_offset(p.nvme_slot) : r.payload_offset;
      r.header = is_write ? sector_of(o.lane) : nullptr;
      r.payload = payload_of(p);
      r.payload_bytes = geometry_.block_bytes;
      in_flight_.emplace(r.id, std::move(o));
      taken.push_back(std::move(t));
    }
  }
  constexpr uint64_t hash_before_issue = uint64_t{1} << 20;
  std::vector<raw_io> batch;
  std::vector<std::pair<size_t, uint64_t>> sums; // (index in taken, checksum) of the batch's writes
  uint64_t hashed = 0;
  auto issue = [&] {
    if (!sums.empty()) {
      mutex_lock lock{mutex_};
      for (auto& [i, sum] : sums) {
        auto it = in_flight_.find(taken[i].io.id);
        if (it == in_flight_.end()) {
          // The watchdog failed it while it was hashed (a timeout shorter than a hash): never
          // issued, so no completion will free its lane.
          if (auto q = quarantined_.find(taken[i].io.id); q != quarantined_.end()) {
            free_lanes_.push_back(q->second);
            quarantined_.erase(q);
          }
          taken[i].write.reset(); // dropped from the batch below
        } else if (taken[i].needs_checksum) {
          it->second.checksum = sum;
        } else {
          sum = it->second.checksum;
        }
      }
    }
    for (const auto& [i, sum] : sums) {
      if (!taken[i].write)
        continue;
      const page_transfer& p = *taken[i].write;
      slot_header h;
      h.slot = p.nvme_slot;
      h.file_id = file_id_;
      h.hash = p.hash;
      h.salt_id = p.salt_id;
      h.payload_bytes = geometry_.block_bytes;
      h.payload_checksum = sum;
      h.sequence = taken[i].sequence;
      encode(h, std::span<std::byte, sector_bytes>{sector_of(taken[i].io.lane), sector_bytes});
      batch.push_back(taken[i].io);
    }
    if (!batch.empty())
      engine_->submit(batch);
    batch.clear();
    sums.clear();
    hashed = 0;
  };
  for (size_t i = 0; i < taken.size(); ++i) {
    const taken_page& t = taken[i];
    if (!t.write) {
      batch.push_back(t.io);
      continue;
    }
    uint64_t sum = 0;
    if (t.needs_checksum) {
      sum = payload_checksum(payload_of(*t.write), geometry_.block_bytes, t.write->hash, t.write->salt_id);
      hashed += geometry_.block_bytes;
    }
    sums.emplace_back(i, sum);
    if (hashed >= hash_before_issue)
      issue();
  }
  issue();
}

caf::error slot_store::check_page(const op& o, int64_t result) {
  const page_transfer& p = o.job->job.pages[o.index];
  const bool is_write = o.job->job.op == page_op::write;
  auto what = [&] { return std::string(is_write ? "write" : "read") + " of NVMe slot " + std::to_string(p.nvme_slot); };
  if (result < 0)
    return os_error(static_cast<int>(-result), "NVMe tier: " + what());
  const uint64_t want = (is_write ? sector_bytes : 0) + geometry_.block_bytes;
  if (static_cast<uint64_t>(result) != want)
    return make_error(errc::io_failure,
                      "NVMe tier: short " + what() + ": " + std::to_string(result) + " of " + std::to_string(want) +
                          " bytes");
  if (is_write || payload_checksum(payload_of(p), geometry_.block_bytes, p.hash, p.salt_id) == o.checksum)
    return {};
  return make_error(errc::corrupted,
                    "NVMe tier: " + what() + " is a miss: its payload fails the checksum (torn or corrupted page)");
}

void slot_store::on_complete(uint64_t id, int64_t result, bool free_lane) {
  op o;
  {
    mutex_lock lock{mutex_};
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) {
      // Late completion of a timed-out request: its lane may now be reused.
      auto q = quarantined_.find(id);
      if (q != quarantined_.end()) {
        ++metrics_.late_completions;
        free_lanes_.push_back(q->second);
        quarantined_.erase(q);
      }
    } else {
      o = std::move(it->second);
      in_flight_.erase(it);
      if (!free_lane) {
        ++metrics_.timeouts;
        quarantined_.emplace(id, o.lane);
      }
    }
  }
  if (!o.job) {
    pump();
    return;
  }
  const bool is_write = o.job->job.op == page_op::write;
  caf::error err = free_lane ? check_page(o, result)
                             : make_error(errc::io_failure,
                                          std::string("NVMe tier: ") + (is_write ? "write" : "read") +
                                              " of NVMe slot " + std::to_string(o.job->job.pages[o.index].nvme_slot) +
                                              ": no completion after " + std::to_string(timeout_.count()) + " ms");
  std::shared_ptr<job_state> finished;
  {
    mutex_lock lock{mutex_};
    if (free_lane)
      free_lanes_.push_back(o.lane);
    direction& d = is_write ? writes_ : reads_;
    if (--d.in_flight == 0)
      d.counters.busy_seconds += std::chrono::duration<double>(clock_type::now() - d.busy_since).count();
    const page_transfer& p = o.job->job.pages[o.index];
    if (err) {
      if (result < 0 && free_lane) {
        ++metrics_.io_errors;
        if (-result == ENOSPC || -result == EDQUOT)
          ++metrics_.enospc;
      } else if (result >= 0 &&
                 static_cast<uint64_t>(result) != (is_write ? sector_bytes : 0) + geometry_.block_bytes) {
        ++metrics_.short_ios;
      } else if (is(err, errc::corrupted)) {
        ++metrics_.corrupted_reads;
      }
      if (is_write)
        slots_[p.nvme_slot].reset(); // on-disk state unknown: (1)
    }
    ++o.attempts;
    if (err && o.attempts <= (is_write ? write_retries_ : read_retries_) && !stopping_) {
      ++metrics_.retries;
      backlog_.push_front(std::move(o));
    } else {
      job_state& j = *o.job;
      if (err) {
        ++(is_write ? metrics_.write_failures : metrics_.read_failures);
        j.errors[o.index] = std::move(err);
      } else {
        ++(is_write ? metrics_.pages_written : metrics_.pages_read);
        j.bytes += geometry_.block_bytes;
        d.counters.bytes += geometry_.block_bytes;
        ++d.counters.operations;
        if (is_write)
          slots_[p.nvme_slot] = stored_page{p.nvme_slot, p.hash, p.salt_id, o.sequence, o.checksum};
      }
      if (--j.left == 0)
        finished = o.job;
    }
  }
  if (finished)
    finish_job(*finished);
  pump();
}

void slot_store::watchdog() {
  // Checks a few times per timeout, so a lost completion is noticed within 1.25x.
  const auto period = std::max<std::chrono::milliseconds>(timeout_ / 4, std::chrono::milliseconds{1});
  mutex_lock lock{mutex_};
  while (!stopping_) {
    lock.wait_for(stop_, period);
    if (stopping_)
      break;
    auto now = coarse_now();
    std::vector<uint64_t> expired;
    for (const auto& [id, o] : in_flight_)
      if (o.deadline < now)
        expired.push_back(id);
    if (expired.empty())
      continue;
    lock.unlock();
    for (uint64_t id : expired)
      on_complete(id, -ETIMEDOUT, false);
    lock.lock();
  }
}

std::vector<stored_page> slot_store::manifest() const {
  mutex_lock lock{mutex_};
  std::vector<stored_page> out;
  for (const auto& s : slots_)
    if (s)
      out.push_back(*s);
  return out;
}

std::optional<stored_page> slot_store::lookup(uint32_t nvme_slot) const {
  mutex_lock lock{mutex_};
  return nvme_slot < slots_.size() ? slots_[nvme_slot] : std::nullopt;
}

caf::error slot_store::flush() {
  if (::fdatasync(fd_) != 0)
    return os_error(errno, "NVMe tier: fdatasync of the slot file");
  return {};
}

store_metrics slot_store::metrics() const {
  mutex_lock lock{mutex_};
  return metrics_;
}

link_counters slot_store::read_counters() const {
  mutex_lock lock{mutex_};
  return reads_.counters;
}

link_counters slot_store::write_counters() const {
  mutex_lock lock{mutex_};
  return writes_.counters;
}

} // namespace kvtier::io
