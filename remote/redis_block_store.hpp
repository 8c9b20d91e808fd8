#pragma once
// The remote tier on Redis: whole KV blocks as values, keyed by their salted
// chained hash, moved between the DRAM region and a Redis server through
// hiredis. The engine shape of io/'s slot_store — page jobs in, one callback
// per job out, from its own thread — so that a page store behind the seam
// wraps either the same way.
//
// A value is a 48-byte header (magic, hash, salt, payload length with the
// payload's encoding in its top byte, XXH3-64 of the payload seeded with
// hash.lo ^ salt) and the block's bytes. The encoding is the quantize-on-
// offload format the block was written in (0: the KV dtype as it is): fp8 and
// int8 blocks have the same size, so a run never reads a block written in
// another encoding as its own; such a read is a counted miss. Fault
// handling is the NVMe tier's: a read whose key is gone (Redis evicted it),
// whose header names another block, or whose payload fails its checksum
// completes with an error for that page (errc::io_failure for a missing key
// or a lost connection, errc::corrupted for a bad value) and is counted; the
// caller treats it as a miss. Nothing is retried; a lost connection is
// reopened at the next job.
//
// Invariants: one thread runs the jobs on one connection (hiredis contexts
// are not thread-safe; list_blocks opens a connection of its own); that
// thread blocks SIGPIPE, so a server that went away fails jobs instead of
// ending the process; jobs complete in submission order; every job's callback
// runs exactly once, also for jobs still queued at destruction.

#include "io/slot_store.hpp"
#include "runtime/backend.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvtier::remote {

struct redis_options {
  std::string host = "127.0.0.1";
  uint16_t port = 6379;
  std::string unix_socket;            // a path: used instead of host and port when set
  std::string key_prefix = "kvtier:"; // keys are PREFIX<salt>:<hash>, hex
  uint32_t timeout_ms = 2000;         // each command
  uint32_t connect_timeout_ms = 2000;
  uint8_t payload_encoding = 0; // what a block's bytes are (nvme_options::payload_encoding's values)
  /// "127.0.0.1:6379" or the socket's path, for messages.
  std::string where() const;
};

/// A block found in the store: its hash and the tenant salt of its key.
struct stored_block {
  block_hash hash;
  uint64_t salt_id = 0;
};

/// Reads that came back as misses, by cause; and writes the server refused.
struct remote_faults {
  uint64_t missing_reads = 0;          // the key was not there (evicted, or never stored)
  uint64_t corrupted_reads = 0;        // header or checksum wrong
  uint64_t foreign_encoding_reads = 0; // written in another payload encoding (another offload_dtype)
  uint64_t failed_reads = 0;           // the connection failed
  uint64_t failed_writes = 0;
};

class redis_block_store {
public:
  /// Connects to the server; blocks move to and from `region`'s block-major slots.
  static caf::expected<std::unique_ptr<redis_block_store>> connect(const redis_options& options,
                                                                   io::dram_region region);
  ~redis_block_store();
  redis_block_store(const redis_block_store&) = delete;
  redis_block_store& operator=(const redis_block_store&) = delete;

  /// Queues `job` (its pages' dram_slot and hash; nvme_slot is ignored: the
  /// hash is the address); `done` runs once when every page finished.
  void submit(page_job job, io::job_callback done);
  /// Waits until every submitted job completed.
  void drain();

  link_counters read_counters() const;
  link_counters write_counters() const;
  remote_faults faults() const;
  /// Up to `limit` blocks the server holds under the key prefix, in the
  /// server's SCAN order (what another process stored: a decode node finds a
  /// prefill node's blocks this way). Keys that do not parse are skipped.
  /// Runs on a connection of its own; call it before submitting jobs.
  caf::expected<std::vector<stored_block>> list_blocks(uint64_t limit) const;
  /// The key a block is stored under.
  std::string key_of(const block_hash& hash, uint64_t salt_id) const;

private:
  struct impl;
  explicit redis_block_store(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace kvtier::remote
