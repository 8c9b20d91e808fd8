#include "io/slot_file.hpp"

#include "io/aligned_buffer.hpp"
#include "io/os_error.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <random>
#include <thread>

namespace kvtier::io {
namespace {

/// Threads that read the headers at recovery: enough to keep a device's queue
/// busy with 4 KiB reads, few enough to be cheap on a small machine.
constexpr unsigned recovery_threads = 8;

int64_t full_pread(int fd, std::byte* buf, uint64_t n, uint64_t offset) {
  uint64_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd, buf + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return -errno;
    if (r == 0)
      break; // past the end: the rest reads as zero
    done += static_cast<uint64_t>(r);
  }
  std::memset(buf + done, 0, n - done);
  return static_cast<int64_t>(n);
}

caf::error full_pwrite(int fd, const std::byte* buf, uint64_t n, uint64_t offset, const std::string& what) {
  ssize_t w;
  do {
    w = ::pwrite(fd, buf, n, static_cast<off_t>(offset));
  } while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(n))
    return os_error(w < 0 ? errno : EIO, what);
  return {};
}

/// True when slot `s`'s header and whole payload lie inside the first `size` bytes.
bool inside(const slot_geometry& g, uint32_t s, uint64_t size) {
  return g.header_offset(s) + sector_bytes <= size && g.payload_offset(s) + g.payload_bytes() <= size;
}

/// Every slot's header, decoded without the file id (slots past the end of a
/// short file stay empty). Errors: the OS refused a read.
caf::expected<std::vector<decoded_header>> read_headers(int fd, const std::string& file, const slot_geometry& g,
                                                        uint64_t size) {
  std::vector<decoded_header> out(g.slots);
  std::atomic<uint32_t> next{0};
  std::atomic<int> failure{0};
  std::vector<std::thread> readers;
  for (unsigned t = 0; t < std::min<uint32_t>(recovery_threads, g.slots); ++t)
    readers.emplace_back([&] {
      auto buf = aligned_bytes(sector_bytes);
      std::span<const std::byte, sector_bytes> view{buf.get(), sector_bytes};
      for (uint32_t slot; (slot = next.fetch_add(1)) < g.slots;) {
        if (!inside(g, slot, size))
          continue;
        int64_t r = full_pread(fd, buf.get(), sector_bytes, g.header_offset(slot));
        if (r < 0) {
          failure = static_cast<int>(-r);
          return;
        }
        out[slot] = decode_header_of_any_file(view, slot); // each thread writes its own slots
      }
    });
  for (auto& t : readers)
    t.join();
  if (failure != 0)
    return os_error(failure, "NVMe tier: cannot read slot headers of " + file);
  return out;
}

/// The state a file of `file_id` holds, from its decoded headers.
slot_file_state adopt(const std::vector<decoded_header>& headers, const slot_geometry& g, uint64_t file_id,
                      uint64_t size) {
  slot_file_state st;
  st.file_id = file_id;
  st.slots.assign(g.slots, std::nullopt);
  st.damaged.assign(g.slots, false);
  uint64_t max_sequence = 0;
  auto& rep = st.report;
  auto damage = [&](uint32_t slot, std::string why) {
    st.damaged[slot] = true;
    ++rep.damaged;
    if (rep.damage.size() < slot_file_report::max_listed_damage)
      rep.damage.push_back({slot, std::move(why)});
  };
  for (uint32_t slot = 0; slot < g.slots; ++slot) {
    const auto& d = headers[slot];
    if (!inside(g, slot, size)) {
      ++rep.truncated;
      continue;
    }
    if (d.state == header_state::damaged) {
      damage(slot, d.why);
      continue;
    }
    if (d.state != header_state::valid || d.header.file_id != file_id)
      continue; // empty, or stale: written under an earlier format of the file
    if (d.header.payload_bytes != g.block_bytes) {
      damage(slot,
             "payload length " + std::to_string(d.header.payload_bytes) + ", the file's blocks are " +
                 std::to_string(g.block_bytes));
      continue;
    }
    st.slots[slot] = stored_page{slot, d.header.hash, d.header.salt_id, d.header.sequence, d.header.payload_checksum};
    ++rep.recovered;
    max_sequence = std::max(max_sequence, d.header.sequence);
  }
  st.next_sequence = max_sequence + 1;
  return st;
}

caf::error write_superblock(int fd, const std::string& file, const slot_geometry& g, uint64_t file_id) {
  superblock sb;
  sb.slots = g.slots;
  sb.block_bytes = g.block_bytes;
  sb.slot_bytes = g.slot_bytes();
  sb.layout = static_cast<uint32_t>(g.layout);
  sb.encoding = g.encoding;
  sb.file_id = file_id;
  auto sector = aligned_bytes(sector_bytes);
  if (!sector)
    return make_error(errc::no_capacity, "NVMe tier: no memory for a sector");
  encode(sb, std::span<std::byte, sector_bytes>{sector.get(), sector_bytes});
  if (auto err = full_pwrite(fd, sector.get(), sector_bytes, 0, "NVMe tier: cannot write the superblock of " + file))
    return err;
  if (::fdatasync(fd) != 0)
    return os_error(errno, "NVMe tier: cannot sync " + file);
  return {};
}

/// Reserves the file's full size; unwritten extents read as zero (empty slots).
caf::error reserve(int fd, const std::string& file, const slot_geometry& g) {
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(g.file_bytes()));
  if (err == EOPNOTSUPP || err == EINVAL)
    err = ::ftruncate(fd, static_cast<off_t>(g.file_bytes())) == 0 ? 0 : errno;
  if (err != 0)
    return os_error(err, "NVMe tier: cannot reserve " + std::to_string(g.file_bytes()) + " bytes for " + file);
  return {};
}

/// A short file back to full size. A slot that straddled the old end keeps no
/// valid header: its payload is partly gone.
caf::error extend(int fd, const std::string& file, const slot_geometry& g, uint64_t size) {
  if (auto err = reserve(fd, file, g))
    return err;
  auto zero = aligned_bytes(sector_bytes);
  if (!zero)
    return make_error(errc::no_capacity, "NVMe tier: no memory for a sector");
  for (uint32_t slot = 0; slot < g.slots; ++slot)
    if (!inside(g, slot, size) && g.header_offset(slot) < size)
      if (auto err = full_pwrite(fd, zero.get(), sector_bytes, g.header_offset(slot),
                                 "NVMe tier: cannot clear a cut-off slot header of " + file))
        return err;
  if (::fdatasync(fd) != 0)
    return os_error(errno, "NVMe tier: cannot sync " + file);
  return {};
}

caf::expected<slot_file_state> format(int fd, const std::string& file, const slot_geometry& g, std::string why) {
  slot_file_state st;
  st.slots.assign(g.slots, std::nullopt);
  st.damaged.assign(g.slots, false);
  st.report.formatted = true;
  st.report.format_why = std::move(why);
  // Drop old contents first: unwritten extents read as zero, i.e. empty slots.
  if (::ftruncate(fd, 0) != 0)
    return os_error(errno, "NVMe tier: cannot truncate " + file);
  if (auto err = reserve(fd, file, g))
    return err;
  std::random_device rd;
  st.file_id = (uint64_t{rd()} << 32) ^ rd() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  if (auto err = write_superblock(fd, file, g, st.file_id))
    return err;
  return st;
}

std::string describe_geometry(uint64_t slots, uint64_t block_bytes, slot_layout layout, uint32_t encoding) {
  return std::to_string(slots) + " slots of " + std::to_string(block_bytes) + " bytes (" +
      (layout == slot_layout::split ? "split" : "adjacent") + " layout" +
      (encoding == 0 ? std::string{} : ", payload encoding " + std::to_string(encoding)) + ")";
}

constexpr const char* reformat_hint = "set [tiers.nvme] on_open = \"reformat\" to discard its blocks";

} // namespace

caf::expected<slot_file_state> format_or_recover(int fd, const std::string& file, const slot_geometry& g,
                                                 open_policy policy) {
  if (policy == open_policy::reformat)
    return format(fd, file, g, "on_open = \"reformat\"");
  struct stat info {};
  if (::fstat(fd, &info) != 0)
    return os_error(errno, "NVMe tier: cannot stat " + file);
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size == 0)
    return format(fd, file, g, "new file");

  auto first = aligned_bytes(sector_bytes);
  if (!first)
    return make_error(errc::no_capacity, "NVMe tier: no memory for a sector");
  if (int64_t rc = full_pread(fd, first.get(), sector_bytes, 0); rc < 0)
    return os_error(static_cast<int>(-rc), "NVMe tier: cannot read the superblock of " + file);
  auto sb = inspect_superblock(std::span<const std::byte, sector_bytes>{first.get(), sector_bytes});

  if (sb.state == superblock_state::valid) {
    const bool same = sb.sb.slots == g.slots && sb.sb.block_bytes == g.block_bytes &&
        sb.sb.slot_bytes == g.slot_bytes() && sb.sb.layout == static_cast<uint32_t>(g.layout) &&
        sb.sb.encoding == g.encoding;
    if (!same)
      return make_error(errc::invalid_config,
                        "NVMe tier: " + file + " holds " +
                            describe_geometry(sb.sb.slots, sb.sb.block_bytes, static_cast<slot_layout>(sb.sb.layout),
                                              sb.sb.encoding) +
                            ", the configuration wants " +
                            describe_geometry(g.slots, g.block_bytes, g.layout, g.encoding) + "; " + reformat_hint +
                            ", or run with the configuration that wrote it");
    auto headers = read_headers(fd, file, g, size);
    if (!headers)
      return std::move(headers.error());
    auto st = adopt(*headers, g, sb.sb.file_id, size);
    if (size < g.file_bytes())
      if (auto err = extend(fd, file, g, size))
        return err;
    return st;
  }

  // No valid superblock: the slot headers at the configured geometry say
  // whether this is a kvtier file, and which format of it.
  auto headers = read_headers(fd, file, g, size);
  if (!headers)
    return std::move(headers.error());
  uint32_t kvtier_headers = 0;
  std::map<uint64_t, uint32_t> votes; // file id -> valid headers that carry it
  for (const auto& d : *headers) {
    if (d.state == header_state::valid)
      ++votes[d.header.file_id];
    if (d.state == header_state::valid || (d.state == header_state::damaged && d.header.magic == slot_magic))
      ++kvtier_headers;
  }
  const std::string what_superblock = sb.state == superblock_state::damaged ? std::string("damaged (") + sb.why + ")"
      : sb.state == superblock_state::blank                                 ? "missing (all zero)"
                                                                            : "unrecognized";
  if (sb.state != superblock_state::damaged && kvtier_headers == 0)
    return format(fd, file, g,
                  sb.state == superblock_state::blank
                      ? file + " holds neither a superblock nor a slot header"
                      : file + " is not a kvtier slot file (no kvtier magic in its superblock or slot headers)");
  if (votes.empty())
    return make_error(errc::corrupted,
                      "NVMe tier: the superblock of " + file + " is " + what_superblock +
                          " and no slot header is valid at the configured " +
                          describe_geometry(g.slots, g.block_bytes, g.layout, g.encoding) + "; " + reformat_hint);
  auto winner =
      std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  auto st = adopt(*headers, g, winner->first, size);
  st.report.superblock_rebuilt = "the superblock was " + what_superblock + "; rebuilt from " +
      std::to_string(winner->second) + " valid slot headers";
  if (size < g.file_bytes())
    if (auto err = extend(fd, file, g, size))
      return err;
  if (auto err = write_superblock(fd, file, g, st.file_id))
    return err;
  return st;
}

std::vector<recovered_block> adoptable_blocks(const std::vector<std::optional<stored_page>>& slots) {
  std::map<std::pair<block_hash, uint64_t>, const stored_page*> newest;
  for (const auto& s : slots) {
    if (!s)
      continue;
    auto [it, inserted] = newest.try_emplace({s->hash, s->salt_id}, &*s);
    if (!inserted && it->second->sequence < s->sequence)
      it->second = &*s;
  }
  std::vector<recovered_block> out;
  out.reserve(newest.size());
  for (const auto& [key, page] : newest)
    out.push_back({page->nvme_slot, page->hash, page->salt_id});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.nvme_slot < b.nvme_slot; });
  return out;
}

} // namespace kvtier::io
