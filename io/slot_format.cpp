#include "io/slot_format.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

namespace kvtier::io {

void encode(superblock sb, std::span<std::byte, sector_bytes> sector) {
  sb.checksum = XXH3_64bits(&sb, offsetof(superblock, checksum));
  std::memset(sector.data(), 0, sector.size());
  std::memcpy(sector.data(), &sb, sizeof sb);
}

std::optional<superblock> decode_superblock(std::span<const std::byte, sector_bytes> sector) {
  superblock sb;
  std::memcpy(&sb, sector.data(), sizeof sb);
  if (sb.magic != superblock_magic || sb.version != format_version)
    return std::nullopt;
  if (sb.checksum != XXH3_64bits(&sb, offsetof(superblock, checksum)))
    return std::nullopt;
  return sb;
}

decoded_superblock inspect_superblock(std::span<const std::byte, sector_bytes> sector) {
  decoded_superblock out;
  std::memcpy(&out.sb, sector.data(), sizeof out.sb);
  const auto& sb = out.sb;
  if (sb.magic != superblock_magic) {
    bool zero = std::all_of(sector.begin(), sector.end(), [](std::byte b) { return b == std::byte{0}; });
    out.state = zero ? superblock_state::blank : superblock_state::foreign;
    return out;
  }
  if (sb.version != format_version) {
    out.state = superblock_state::damaged;
    out.why = "unknown format version";
  } else if (sb.checksum != XXH3_64bits(&sb, offsetof(superblock, checksum))) {
    out.state = superblock_state::damaged;
    out.why = "checksum mismatch";
  } else {
    out.state = superblock_state::valid;
  }
  return out;
}

void encode(slot_header h, std::span<std::byte, sector_bytes> sector) {
  h.header_checksum = XXH3_64bits(&h, offsetof(slot_header, header_checksum));
  std::memset(sector.data(), 0, sector.size());
  std::memcpy(sector.data(), &h, sizeof h);
}

decoded_header decode_header_of_any_file(std::span<const std::byte, sector_bytes> sector, uint32_t slot) {
  decoded_header out;
  std::memcpy(&out.header, sector.data(), sizeof out.header);
  const auto& h = out.header;
  if (h.magic != slot_magic) {
    // All zero is a slot never written; anything else is damage.
    bool zero = std::all_of(sector.begin(), sector.begin() + sizeof h, [](std::byte b) { return b == std::byte{0}; });
    out.state = zero ? header_state::empty : header_state::damaged;
    out.why = zero ? "" : "not a slot header (no magic)";
    return out;
  }
  if (h.version != format_version) {
    out.state = header_state::damaged;
    out.why = "unknown format version";
  } else if (h.header_checksum != XXH3_64bits(&h, offsetof(slot_header, header_checksum))) {
    out.state = header_state::damaged;
    out.why = "header checksum mismatch (torn or corrupted write)";
  } else {
    // A sound header of another slot is stale (another geometry), not damage.
    out.state = h.slot == slot ? header_state::valid : header_state::empty;
  }
  return out;
}

decoded_header decode_header(std::span<const std::byte, sector_bytes> sector, uint32_t slot, uint64_t file_id) {
  decoded_header out = decode_header_of_any_file(sector, slot);
  // A sound header of an earlier format of the file is stale, not damage.
  if (out.state == header_state::valid && out.header.file_id != file_id)
    out.state = header_state::empty;
  return out;
}

#if KVTIER_IO_AVX2
namespace detail {
uint64_t xxh3_avx2(const void* data, size_t bytes, uint64_t seed);
} // namespace detail
#endif

uint64_t payload_checksum(const std::byte* payload, uint64_t bytes, const block_hash& hash, uint64_t salt_id) {
  const uint64_t seed = hash.lo ^ hash.hi ^ salt_id;
#if KVTIER_IO_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2)
    return detail::xxh3_avx2(payload, bytes, seed);
#endif
  return XXH3_64bits_withSeed(payload, bytes, seed);
}

} // namespace kvtier::io
