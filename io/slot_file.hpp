#pragma once
// The slot file at open: format a new one, or take over what an earlier run
// left in it. The request pipeline (slot_store.hpp) starts from the state
// this returns.
//
// What happens to the file, by what its first sector holds:
//   empty file, or on_open = reformat        formatted (nothing to keep, or told so)
//   valid superblock, same geometry          every slot header read; valid ones recovered
//   valid superblock, file shorter           the slots that end inside the file recovered,
//                                            the rest counted `truncated`; the file is
//                                            extended and their headers cleared
//   valid superblock, other geometry         error naming the file (reuse refuses)
//   damaged superblock (kvtier's magic),     headers read at the configured geometry; the
//   or any superblock over kvtier headers    file id most valid headers carry wins; the
//                                            superblock is rewritten from them. No valid
//                                            header: error naming the file
//   blank or foreign, no kvtier header       not kvtier's: formatted, and the report says so
//
// Invariants:
//  (1) Without on_open = reformat, a file that holds a readable kvtier slot
//      header is never formatted: its blocks are recovered or open fails.
//  (2) Every slot is exactly one of: recovered, damaged (a header with
//      kvtier's magic that fails a check, or a valid header whose payload
//      length is not the file's), truncated, or empty.
//  (3) The report names why the file was formatted, why the superblock was
//      rebuilt, and why each listed damaged slot is damaged.

#include "io/nvme_options.hpp"
#include "io/slot_format.hpp"
#include "runtime/block_hash.hpp"
#include "runtime/recovered_block.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::io {

/// One block found on disk (or written since open).
struct stored_page {
  uint32_t nvme_slot = 0;
  block_hash hash;
  uint64_t salt_id = 0;
  uint64_t sequence = 0; // larger = written later
  uint64_t checksum = 0; // the payload's, as in its header
};

struct damaged_slot {
  uint32_t nvme_slot = 0;
  std::string why;
};

/// What open found in the file and did to it.
struct slot_file_report {
  bool formatted = false;         // true: a fresh file (nothing recovered)
  std::string format_why;         // why it was formatted, when it was
  std::string superblock_rebuilt; // why the superblock was rewritten from slot headers, when it was
  uint32_t recovered = 0;         // valid blocks found
  uint32_t damaged = 0;           // slots whose header failed its checks
  uint32_t truncated = 0;         // slots lost because the file ended before them
  /// The first damaged slots (at most max_listed_damage), each with why.
  std::vector<damaged_slot> damage;
  static constexpr size_t max_listed_damage = 16;
};

struct slot_file_state {
  uint64_t file_id = 0;
  std::vector<std::optional<stored_page>> slots; // one per slot: the manifest
  std::vector<bool> damaged;                     // one per slot
  uint64_t next_sequence = 1;                    // after the largest recovered
  slot_file_report report;
};

/// Formats or recovers the open file `fd` (named `file` in messages) for
/// geometry `g`, as the table above says.
caf::expected<slot_file_state> format_or_recover(int fd, const std::string& file, const slot_geometry& g,
                                                 open_policy policy);

/// The blocks to adopt from a manifest: one per (hash, salt), the newest copy
/// where a block is stored twice, in slot order.
std::vector<recovered_block> adoptable_blocks(const std::vector<std::optional<stored_page>>& slots);

} // namespace kvtier::io
