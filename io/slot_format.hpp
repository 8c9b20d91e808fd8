#pragma once
// The on-disk format of kvtier's NVMe tier: one slot file per store.
//
// Two layouts, chosen by block size when the file is formatted:
//
// adjacent (small blocks; one request moves header and payload together)
//   offset 0                    superblock (one 4 KiB sector)
//   offset 4096 + s * slot      slot s: [header sector 4 KiB][payload, block_bytes rounded up to 4 KiB]
//
// split (large blocks; payloads on a 2 MiB grid, as devices like them)
//   offset 0                    superblock
//   offset 4096 + s * 4096      header sector of slot s
//   payload_base + s * payload  payload of slot s, payload_base = round_up(4096 + slots * 4096, 2 MiB)
//
// A payload holds one block, all layers, block-major exactly as in the DRAM
// pool, so it moves as one contiguous I/O. Every field is little-endian
// (kvtier runs on x86-64 and aarch64 only; static_asserts below keep it so).
//
// Invariants:
//  (1) The slot headers are the truth. There is no other index on disk: a
//      restart rebuilds the manifest by reading every header, and a damaged
//      superblock is rebuilt from them (slot_file.hpp).
//  (2) A header is valid only if its magic, version, own checksum, slot index
//      and file id all match; otherwise the slot is empty.
//  (3) A payload is returned as data only if XXH3-64 of its bytes equals the
//      header's payload_checksum AND the header's hash and salt equal what the
//      reader asked for (slot_store checks the header once, at open or at
//      write, and keeps these fields in its manifest). A torn write (header of
//      one block, payload of another, or half of each) fails (3) and reads as
//      errc::corrupted, never as data.
//  (4) The file id is random per format; headers from an earlier format of the
//      same file never validate against a new superblock.

#include "runtime/block_hash.hpp"

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace kvtier::io {

static_assert(std::endian::native == std::endian::little, "the slot format is little-endian");

/// Alignment and size of every I/O: O_DIRECT needs the logical block size
/// (512 on most devices); 4 KiB also matches ext4/xfs blocks and NVMe LBAs
/// formatted at 4 KiB, so no request straddles a device block.
inline constexpr uint64_t sector_bytes = 4096;
/// Largest block: io_uring registers at most 1 GiB per buffer, and Linux
/// moves at most 2 GiB - 4 KiB per read/write call.
inline constexpr uint64_t max_block_bytes = uint64_t{1} << 30;

inline constexpr uint64_t superblock_magic = 0x31424b5352455456ull; // "VTERSKB1"
inline constexpr uint64_t slot_magic = 0x31544f4c53525456ull;       // "VTRSLOT1"
inline constexpr uint32_t format_version = 1;
/// Where the split layout's payload region starts, and so how its payloads
/// align when the block is a multiple of it: huge-page size, and the stripe or
/// cluster size of many devices and virtual disks (measured on this VM: fio's
/// 2 MiB random reads run at half speed off the 2 MiB grid).
inline constexpr uint64_t split_alignment = uint64_t{2} << 20;

enum class slot_layout : uint32_t { adjacent = 0, split = 1 };

constexpr uint64_t round_up(uint64_t n, uint64_t to) {
  return (n + to - 1) / to * to;
}

struct slot_geometry {
  uint64_t block_bytes = 0; // payload of one block (all layers)
  uint32_t slots = 0;
  slot_layout layout = slot_layout::adjacent;
  /// What a payload's bytes are: 0 = the KV in HBM's own format, else the
  /// quantize-on-offload format's id (nvme_options::payload_encoding). Two
  /// formats can share a block size (fp8 and int8); a file written in one is
  /// never read as the other.
  uint32_t encoding = 0;

  constexpr uint64_t payload_bytes() const { return round_up(block_bytes, sector_bytes); }
  /// Disk bytes per block, header included.
  constexpr uint64_t slot_bytes() const { return sector_bytes + payload_bytes(); }
  constexpr uint64_t header_offset(uint32_t s) const {
    return sector_bytes + uint64_t{s} * (layout == slot_layout::split ? sector_bytes : slot_bytes());
  }
  constexpr uint64_t payload_base() const {
    return round_up(sector_bytes + uint64_t{slots} * sector_bytes, split_alignment);
  }
  constexpr uint64_t payload_offset(uint32_t s) const {
    return layout == slot_layout::split ? payload_base() + uint64_t{s} * payload_bytes()
                                        : header_offset(s) + sector_bytes;
  }
  constexpr uint64_t file_bytes() const {
    return layout == slot_layout::split ? payload_offset(slots) : header_offset(slots);
  }
};

/// First sector of the file: what geometry the slots were formatted with.
struct superblock {
  uint64_t magic = superblock_magic;
  uint32_t version = format_version;
  uint32_t slots = 0;
  uint64_t block_bytes = 0;
  uint64_t slot_bytes = 0;
  uint32_t layout = 0;   // slot_layout
  uint32_t encoding = 0; // slot_geometry::encoding: what the payload bytes are
  uint64_t file_id = 0;  // random per format, copied into every slot header
  uint64_t checksum = 0; // XXH3-64 of the bytes above
};

/// First sector of a slot.
struct slot_header {
  uint64_t magic = slot_magic;
  uint32_t version = format_version;
  uint32_t slot = 0;             // the slot this header was written for
  uint64_t file_id = 0;          // superblock's file_id
  block_hash hash;               // the block's content identity
  uint64_t salt_id = 0;          // tenant salt the hash was made with
  uint64_t payload_bytes = 0;    // block_bytes at write time
  uint64_t payload_checksum = 0; // XXH3-64 of the payload, seeded with hash.lo ^ salt_id
  uint64_t sequence = 0;         // store-wide write counter: the newest copy of a hash wins
  uint64_t header_checksum = 0;  // XXH3-64 of every byte above
};

static_assert(sizeof(superblock) == 56);
static_assert(sizeof(slot_header) == 80);

/// Writes `sb` with its checksum into a zeroed sector.
void encode(superblock sb, std::span<std::byte, sector_bytes> sector);
/// The superblock, or nullopt when the sector holds none (all zero or foreign).
std::optional<superblock> decode_superblock(std::span<const std::byte, sector_bytes> sector);

/// What the first sector holds: a kvtier superblock, nothing (all zero),
/// something else (another program's bytes), or kvtier's magic with a wrong
/// version or checksum (damage).
enum class superblock_state : uint8_t { valid, blank, foreign, damaged };
struct decoded_superblock {
  superblock_state state = superblock_state::blank;
  superblock sb;
  const char* why = ""; // for damaged: which check failed
};
decoded_superblock inspect_superblock(std::span<const std::byte, sector_bytes> sector);

/// Writes `h` with its header checksum into a zeroed sector.
void encode(slot_header h, std::span<std::byte, sector_bytes> sector);

enum class header_state : uint8_t { valid, empty, damaged };
struct decoded_header {
  header_state state = header_state::empty;
  slot_header header;
  const char* why = ""; // for damaged: which check failed
};
/// Checks invariant (2) for slot `slot` of the file `file_id`.
decoded_header decode_header(std::span<const std::byte, sector_bytes> sector, uint32_t slot, uint64_t file_id);
/// The same checks but the file id's: what a damaged superblock leaves to go
/// on. `valid` here means "a sound header written for this slot" of some format.
decoded_header decode_header_of_any_file(std::span<const std::byte, sector_bytes> sector, uint32_t slot);

/// The payload checksum of invariant (3).
uint64_t payload_checksum(const std::byte* payload, uint64_t bytes, const block_hash& hash, uint64_t salt_id);

} // namespace kvtier::io
