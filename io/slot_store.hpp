#pragma once
// The NVMe tier's core, without actors: a slot file of checksummed blocks,
// moved to and from the DRAM pool by an I/O engine (io_uring or threads).
// This is the request pipeline; slot_file.hpp formats or recovers the file at
// open, engine_selector.hpp picks the engine. real/nvme_page_store.hpp adapts it
// to the backend seam; tests and the benchmark drive it directly through its
// callback.
//
// Invariants (beyond slot_format.hpp's):
//  (1) A write never changes DRAM. A failed write leaves the block in DRAM,
//      is retried up to write_retries times, then reported; the slot then
//      reads as a miss (its on-disk state is unknown, so its manifest entry
//      is dropped).
//  (2) The manifest (one entry per slot: hash, salt, payload checksum) is
//      built from the headers at open and from completed writes; a slot being
//      written has no entry. A read asks the manifest first: no entry, or one
//      for another hash or salt, is a miss without I/O. Otherwise the read
//      moves the payload alone (the same bytes as the block, as fio would) and
//      completes ok only if its XXH3 equals the entry's checksum; otherwise the
//      page reports errc::corrupted or errc::io_failure and its DRAM slot holds
//      no valid bytes. (This is slot_format.hpp's invariant (3), with the
//      header checked once, at open or at write, instead of at every read.)
//  (3) At most queue_depth requests are in the engine; more wait in a FIFO
//      backlog. One lane (a header sector) per request in flight.
//  (4) A request without a completion after io_timeout_ms is failed (and
//      retried); its lane stays reserved until the late completion arrives,
//      so the kernel never writes into a sector that was handed out again.
//  (5) Completion of a job is reported exactly once, after every page of it
//      has finished (ok or failed).
//  (6) Destruction waits for every submitted job to complete. Nothing is
//      written at shutdown: a process killed at any point restarts with every
//      completed write (see recovery in open()).
//
// Threading: submit() from any thread; callbacks run on the engine's
// completion thread, or inside submit() for rejected jobs.

#include "io/nvme_options.hpp"
#include "io/page_file.hpp"
#include "io/probe.hpp"
#include "io/slot_file.hpp"
#include "io/slot_format.hpp"
#include "runtime/backend.hpp"
#include "runtime/mutex.hpp"
#include "runtime/thread_annotations.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace kvtier::io {

/// The DRAM pool's memory: block-major, base 4 KiB aligned under O_DIRECT.
struct dram_region {
  std::byte* base = nullptr;
  tier_layout layout;
};

/// What open() did, for the log: the engine, the layout, and what the slot
/// file held (slot_file.hpp).
struct open_report : slot_file_report {
  probe_result probe;
  std::string engine; // the engine's own description
  std::string layout; // which slot layout the file uses
  std::string message() const;
};

/// Counters since open; every failure path is counted.
struct store_metrics {
  uint64_t pages_written = 0;
  uint64_t pages_read = 0;
  uint64_t write_failures = 0;   // pages reported failed to the caller
  uint64_t read_failures = 0;    // pages reported failed (io or corrupted)
  uint64_t corrupted_reads = 0;  // attempts that failed a header/checksum check
  uint64_t io_errors = 0;        // attempts the OS failed (-errno)
  uint64_t enospc = 0;           // of which ENOSPC/EDQUOT
  uint64_t short_ios = 0;        // attempts that moved fewer bytes than asked
  uint64_t timeouts = 0;         // attempts failed by the watchdog
  uint64_t late_completions = 0; // completions that arrived after their timeout
  uint64_t retries = 0;
  uint64_t rejected_jobs = 0;   // invalid requests (never reached the device)
  uint64_t manifest_misses = 0; // reads answered "miss" by the manifest, without I/O
};

struct job_result {
  uint64_t tag = 0;
  uint64_t bytes = 0;            // payload bytes of pages that succeeded
  caf::error error;              // the first page's failure, if any
  std::vector<caf::error> pages; // per page of the job, in order
};
using job_callback = std::function<void(job_result)>;

class slot_store {
public:
  /// Opens or creates the slot file for `nvme_slots` blocks of
  /// region.layout.block_bytes(); recovers the blocks of an earlier run as
  /// slot_file.hpp says (report() tells what it found). Misaligned or
  /// oversized geometry: errc::invalid_argument; a kvtier file it may not
  /// reformat: errc::invalid_config or errc::corrupted, naming the file.
  static caf::expected<std::unique_ptr<slot_store>> open(const nvme_options& options, uint32_t nvme_slots,
                                                         dram_region region);
  ~slot_store();
  slot_store(const slot_store&) = delete;
  slot_store& operator=(const slot_store&) = delete;

  /// Queues every page of `job`; `done` runs once when all finished. A job
  /// naming a slot out of range, the same NVMe slot twice, or (for writes) an
  /// empty hash is rejected whole with errc::invalid_argument, before any I/O.
  void submit(page_job job, job_callback done);

  /// Blocks on disk now: recovered at open, updated by completed writes.
  std::vector<stored_page> manifest() const;
  std::optional<stored_page> lookup(uint32_t nvme_slot) const;
  /// The blocks found on disk at open, for the block manager to adopt: one
  /// per (hash, salt), the newest copy where one was stored twice, in slot
  /// order. Fixed at open; later writes do not change it.
  const std::vector<recovered_block>& recovered_blocks() const { return recovered_; }

  /// Makes completed writes durable against power loss (fdatasync). Completed
  /// writes already survive a process crash without it.
  caf::error flush();

  const open_report& report() const { return report_; }
  store_metrics metrics() const;
  link_counters read_counters() const;
  link_counters write_counters() const;
  const slot_geometry& geometry() const { return geometry_; }
  uint32_t dram_slots() const { return region_.layout.slots; }

private:
  struct job_state;
  struct op {
    std::shared_ptr<job_state> job;
    uint32_t index = 0;    // page within the job
    uint32_t attempts = 0; // finished attempts so far
    uint32_t lane = 0;
    uint64_t sequence = 0; // header sequence of a write
    uint64_t checksum = 0; // payload checksum: computed for a write, expected by a read
    std::chrono::steady_clock::time_point deadline;
  };
  struct direction {
    uint32_t in_flight = 0;
    std::chrono::steady_clock::time_point busy_since;
    link_counters counters;
  };

  slot_store() = default;
  void pump();
  void on_complete(uint64_t id, int64_t result, bool free_lane);
  void watchdog();
  caf::error check_page(const op& o, int64_t result);
  caf::error reject(const page_job& job);
  caf::error manifest_miss(const page_transfer& p) const REQUIRES(mutex_);
  void finish_job(job_state& j);
  std::byte* payload_of(const page_transfer& p) const;
  std::byte* sector_of(uint32_t lane) const;

  // Constant after open.
  int fd_ = -1;
  slot_geometry geometry_;
  dram_region region_;
  uint64_t file_id_ = 0;
  uint32_t write_retries_ = 0;
  uint32_t read_retries_ = 0;
  std::chrono::milliseconds timeout_{0};
  std::unique_ptr<std::byte, void (*)(void*)> header_arena_{nullptr, nullptr};
  std::unique_ptr<page_file> engine_;
  open_report report_;
  std::vector<recovered_block> recovered_;

  mutable kvtier::mutex mutex_;
  std::condition_variable drained_; // open_jobs_ reached 0
  std::condition_variable stop_;    // wakes the watchdog to exit
  std::deque<op> backlog_ GUARDED_BY(mutex_);
  std::unordered_map<uint64_t, op> in_flight_ GUARDED_BY(mutex_);         // by request id
  std::unordered_map<uint64_t, uint32_t> quarantined_ GUARDED_BY(mutex_); // timed-out id -> lane
  std::vector<uint32_t> free_lanes_ GUARDED_BY(mutex_);
  std::vector<std::optional<stored_page>> slots_ GUARDED_BY(mutex_); // the manifest
  std::vector<bool> damaged_ GUARDED_BY(mutex_);                     // header failed its checks at open
  uint64_t next_id_ GUARDED_BY(mutex_) = 1;
  uint64_t next_sequence_ GUARDED_BY(mutex_) = 1;
  uint64_t open_jobs_ GUARDED_BY(mutex_) = 0; // submitted, not yet reported
  bool stopping_ GUARDED_BY(mutex_) = false;
  store_metrics metrics_ GUARDED_BY(mutex_);
  direction reads_ GUARDED_BY(mutex_);
  direction writes_ GUARDED_BY(mutex_);
  std::thread watchdog_;
};

} // namespace kvtier::io
